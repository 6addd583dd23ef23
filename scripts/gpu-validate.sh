#!/usr/bin/env bash
# gpufleet against the real thing, on a machine with an NVIDIA GPU (docs/validation.md says what each file
# is compared with). Run from the repository root, as root (XID registration needs it), on an idle GPU:
#
#   scripts/gpu-validate.sh [RESULT_DIR]      (default: $OUT, else ./gpu-validate-results)
#
# GF names the gpufleet binary (default build/gpufleet); GF_LIB, if set, is put in LD_LIBRARY_PATH for
# gpufleet alone (a binary carried from another machine with the .so files `ldd` lists), never for the
# job, whose own libraries (torch) must not see it. Needs nvidia-smi, python3 with pynvml (nvidia-ml-py)
# and torch. Takes about 3 minutes; every step is bounded by `timeout` and a failing step is recorded in
# steps.log, not fatal. Writes one archive, results.tgz, in RESULT_DIR.
set -u
RESULT_DIR=${1:-${OUT:-$PWD/gpu-validate-results}}
GF_BIN=${GF:-build/gpufleet}
GF_BIN=$(cd "$(dirname "$GF_BIN")" && pwd)/$(basename "$GF_BIN")
PY=scripts/gpu_validate.py
W=$(mktemp -d) # mode 0700: the store and the socket live here
D=$W/r
mkdir -p "$D" "$RESULT_DIR"
GFW=$W/gf # gpufleet with its libraries, as a program (timeout and env run programs, not functions)
{
  echo '#!/bin/sh'
  if [ -n "${GF_LIB:-}" ]; then echo "LD_LIBRARY_PATH='$GF_LIB'; export LD_LIBRARY_PATH"; fi
  echo "exec '$GF_BIN' \"\$@\""
} >"$GFW"
chmod 755 "$GFW"
step() { # step NAME SECONDS CMD...: stdout to NAME, stderr to NAME.err, outcome to steps.log
  local name=$1 secs=$2 start=$SECONDS rc
  shift 2
  timeout "$secs" "$@" >"$D/$name" 2>"$D/$name.err"
  rc=$?
  echo "$(date -u +%T) $name rc=$rc $((SECONDS - start))s" | tee -a "$D/steps.log"
}
QUERY=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,utilization.memory
QUERY=$QUERY,temperature.gpu,power.draw,power.limit,fan.speed,clocks.gr,clocks.sm,clocks.mem,pstate
QUERY=$QUERY,persistence_mode,mig.mode.current,ecc.errors.corrected.volatile.total
QUERY=$QUERY,ecc.errors.uncorrected.volatile.total,pcie.link.gen.current,pcie.link.width.current

# 1. the machine and the three readers of the idle GPU, back to back
step env.txt 20 sh -c 'date -u; uname -a; nvidia-smi; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"'
step ldd.txt 10 env ${GF_LIB:+LD_LIBRARY_PATH=$GF_LIB} ldd "$GF_BIN"
step backends.json 30 "$GFW" backends --json
step status-nvml.json 30 "$GFW" --backend nvml status --json
step nvidia-smi.csv 30 nvidia-smi --query-gpu=$QUERY --format=csv
step pynvml.json 60 python3 $PY pynvml
step status-smi.json 30 "$GFW" --backend nvidia-smi status --json
step ps.json 30 "$GFW" --backend nvml ps --json

# 2. health, as nvidia-smi reports it
step nvidia-smi-health.txt 30 nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,PERFORMANCE
step remapped-rows.csv 30 nvidia-smi --query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits
step q-x.xml 30 nvidia-smi -q -x
step dmon-help.txt 10 nvidia-smi dmon -h

# 3. what a reading costs: one CLI snapshot through each path, and the nvidia-smi it replaces
step time-status-nvml.json 120 python3 $PY time 15 "$GFW" --backend nvml status --json
step time-status-smi.json 120 python3 $PY time 15 "$GFW" --backend nvidia-smi status --json
step time-nvidia-smi.json 60 python3 $PY time 15 nvidia-smi --query-gpu=index,memory.used,utilization.gpu --format=csv
step time-q-x.json 60 python3 $PY time 5 nvidia-smi -q -x
step time-remapped.json 60 python3 $PY time 5 nvidia-smi --query-remapped-rows=gpu_uuid --format=csv

# 4. the agent on the real GPU: its documents, then its CPU per collection at 1 Hz, idle (GPM off: issue 24's
#    collection cost leaves GPM out; `monitor` below reads GPM)
mkdir -m 700 "$W/db"
(
  cd "$W" || exit
  if [ -n "${GF_LIB:-}" ]; then export LD_LIBRARY_PATH=$GF_LIB; fi
  setsid "$GF_BIN" --gpm-interval 0 serve --listen 127.0.0.1:0 --port-file "$W/port" --db "$W/db/gf.db" \
    --socket "$W/agent.sock" >"$D/serve.out" 2>"$D/serve.log" &
  echo $! >"$W/pid"
)
for _ in $(seq 50); do [ -s "$W/port" ] && break; sleep 0.2; done
P=$(cat "$W/port" 2>/dev/null)
PID=$(cat "$W/pid")
U=http://127.0.0.1:$P
sleep 3
for doc in metrics.txt:/metrics agent.json:/api/v1/monitoring/gpu-metrics gpu0.json:/api/v1/gpus/0 \
  health.json:/api/health; do
  step "fetch-${doc%%:*}.log" 20 python3 $PY fetch "$U" "${doc#*:}" "$D/${doc%%:*}"
done
step agent-idle.json 60 python3 $PY agent "$U" "$PID" 30

# 5. a real job: GPM through `gpufleet monitor`, then the driver's own GPM view over the same load, while the
#    agent's CPU per collection is measured under load; then `gpufleet run` through the agent (its energy)
step agent-load.json 70 python3 $PY agent "$U" "$PID" 45 &
AGENT_LOAD=$!
step monitor.log 90 "$GFW" --backend nvml --gpm-interval 1 monitor -n 1 -o "$D/monitor.json" -- \
  env -u LD_LIBRARY_PATH sh -c "python3 $PY burn 15 > $D/burn-monitor.json"
step agent-under-load.json 20 python3 $PY fetch "$U" /api/v1/gpus/0 "$D/gpu0-load.json"
step nvidia-smi-load.csv 20 nvidia-smi --query-gpu=$QUERY --format=csv
env -u LD_LIBRARY_PATH python3 $PY burn 20 >"$D/burn-dmon.json" 2>"$D/burn-dmon.err" &
BURN=$!
sleep 6
step gpm-dmon.txt 20 nvidia-smi dmon --gpm-metrics 1,2,3,5,10,11,12,13 -c 10
step gpu0-load-gpm.json 20 python3 $PY fetch "$U" /api/v1/gpus/0 "$D/gpu0-load-gpm.json"
wait $BURN
wait $AGENT_LOAD
step energy-before.json 20 python3 $PY energy # nvidia-smi 580 has no query field for it
step run.json 120 env GPUFLEET_SOCKET="$W/agent.sock" "$GFW" run --gpus 1 --wait 60 --max-utilization 100 -n 0.5 --name gpu-validate --json -- \
  env -u LD_LIBRARY_PATH sh -c "python3 $PY burn 15 > $D/burn-run.json"
step energy-after.json 20 python3 $PY energy
step metrics-after.txt 20 python3 $PY fetch "$U" /metrics "$D/metrics-after.txt"
step jobs.json 20 env GPUFLEET_SOCKET="$W/agent.sock" "$GFW" jobs --json
step usage.json 20 env GPUFLEET_SOCKET="$W/agent.sock" "$GFW" usage --json
kill "$PID" 2>/dev/null
sleep 1
tar czf "$RESULT_DIR/results.tgz" -C "$W" r
echo "results: $RESULT_DIR/results.tgz"
