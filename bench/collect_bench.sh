#!/usr/bin/env bash
# The agent's CPU per collection (issue 24, goal 5): `gpufleet --backend nvml serve` at 1 Hz on the fake
# NVML whose calls cost what they cost on a real H100 (driver 580; bench/collect_scenario.py says which
# figures), GPM off (it has its own rate: bench/gpm_bench.sh). Per row: CPU of the whole agent process over
# the window (every thread's run time from /proc/PID/task/*/schedstat, in ns; /proc/PID/stat's utime+stime
# beside it as a check) divided by the collections made in it (gpufleet_collections_total), and its
# context switches per second (wakeups).
# Rows: 8 GPUs with free calls (gpufleet alone); 1 GPU (the lent H100's shape) and 8 GPUs with the H100's costs; then with GPU processes that
# are real processes among a few hundred others in /proc; 16 GPUs (HGX/NVL); MIG (7 instances per GPU).
# Usage: bench/collect_bench.sh [SECONDS per row, default 20]   QUICK=1: 8 s rows.
#   PERF=1: also `perf record -g` (DWARF call graphs) the agent in one more row (8 GPUs, 16 GPU processes, free
#   NVML calls: gpufleet's own work), and print the profile's top entries: by self time (perf report --no-children) and gpufleet's functions with
#   what they call (--children). SLEEPERS=N: processes added to /proc (default 300).
#   PERF_DATA=FILE: keep the profile there.
#   GF_BENCH_BUILD: the build directory (default build); GF_BENCH_GPUFLEET: the binary (default $B/gpufleet,
#   e.g. a copy of the one before a change).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${GF_BENCH_BUILD:-build}
D=${1:-20}
[[ ${QUICK:-0} == 1 ]] && D=8
SLEEPERS=${SLEEPERS:-300}
tmp=$(mktemp -d)
perf_data=${PERF_DATA:-$tmp/perf.data}
sleepers=()
agent=
cleanup() {
  [[ -n $agent ]] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null
  for p in "${sleepers[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

export GPUFLEET_NVML_LIBRARY=$PWD/$B/tests/libnvidia-ml-fake.so
export NO_COLOR=1 GPUFLEET_SOCKET=none GPUFLEET_TOKEN=bench
GF=${GF_BENCH_GPUFLEET:-$B/gpufleet}
[[ -x $GF && -f $GPUFLEET_NVML_LIBRARY ]] || { echo "collect_bench: build $B first (make build)" >&2; exit 1; }

# A realistic /proc: a few hundred processes; the GPU processes of the scenarios are some of them.
for _ in $(seq "$SLEEPERS"); do
  sleep 100000 &
  sleepers+=($!)
done
pids=$(IFS=,; echo "${sleepers[*]:0:112}")

scenario() {  # name, collect_scenario.py options
  local out=$tmp/$1.json
  shift
  python3 bench/collect_scenario.py "$out" "$@"
  echo "$out"
}

cpu_ns() {  # every live thread's run time, ns
  awk '{ s += $1 } END { printf "%d\n", s }' /proc/"$1"/task/*/schedstat
}
ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' /proc/"$1"/stat; }
ctxsw() {
  cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s }'
}
collections() {
  curl -s "http://127.0.0.1:$(cat "$tmp/port")/metrics" | awk '/^gpufleet_collections_total/ { print $2 }'
}

echo "== agent CPU per collection at 1 Hz (fake NVML at the H100's call costs, GPM off), ${D} s per row;" \
  "$(nproc) cores, $(ps -e --no-headers | wc -l) processes in /proc, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %6s %12s %10s %12s %10s\n' case colls "per coll." "(stat)" "of one core" "ctxsw/s"
start() {  # scenario: the agent, listening; its pid in $agent
  rm -f "$tmp/port"
  FAKE_NVML_SCENARIO=$1 nice -n -15 "$GF" --backend nvml --gpm-interval 0 serve --listen 127.0.0.1:0 \
    --db "$tmp/db/gf.db" --port-file "$tmp/port" 2>"$tmp/serve.log" &
  agent=$!
  for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
  [[ -s $tmp/port ]] || { cat "$tmp/serve.log" >&2; exit 1; }
}
stop() { kill "$agent" && wait "$agent" || true; agent=; }
# A store that has seen a node's life: 2 000 ended leases of one GPU each (what a few days of jobs, or one
# run of bench/agent_bench.sh, leave), written beside the schema the agent made.
seed_leases() {
  start "$1"
  stop
  python3 - "$tmp/db/gf.db" <<'PY'
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1])
now = int(time.time() * 1000)
for i in range(2000):
    lid = "bench-%05d" % i
    c.execute("INSERT INTO leases(id, job_id, name, owner_pid, owner_start, owner_user, created_ms, released_ms,"
              " release_reason, owner_uid) VALUES (?, ?, 'bench', 1, 1, 'root', ?, ?, 'released', 0)",
              (lid, "job-%d" % i, now - 7200000 + i * 3000, now - 7200000 + i * 3000 + 2000))
    c.execute("INSERT INTO lease_gpus(lease_id, gpu_index, gpu_key, gpu_uuid, active) VALUES (?, ?, ?, ?, 0)",
              (lid, i % 8, "GPU-%d" % (i % 8), "GPU-%d" % (i % 8)))
c.commit()
PY
}

row() {  # label, scenario, [perf] [leases]
  rm -rf "$tmp/db"
  mkdir -p "$tmp/db"
  [[ " ${*:3} " == *" leases "* ]] && seed_leases "$2"
  start "$2"
  sleep 3  # past start-up, the first history flush and maintenance
  local c0 n0 t0 x0 c1 n1 t1 x1 perf_pid=
  c0=$(collections); n0=$(cpu_ns $agent); t0=$(ticks $agent); x0=$(ctxsw $agent)
  if [[ " ${*:3} " == *" perf "* ]]; then
    perf record -q --call-graph dwarf,16384 -F 20000 -o "$perf_data" -p $agent -- sleep "$D" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  sleep "$D"
  n1=$(cpu_ns $agent); t1=$(ticks $agent); x1=$(ctxsw $agent); c1=$(collections)
  [[ -n $perf_pid ]] && wait $perf_pid
  stop
  awk -v l="$1" -v c=$((c1 - c0)) -v n=$((n1 - n0)) -v t=$((t1 - t0)) -v x=$((x1 - x0)) -v d="$D" \
    -v hz="$(getconf CLK_TCK)" 'BEGIN {
    printf "%-44s %6d %9.3f ms %7.2f ms %10.3f %% %10.1f\n", l, c, n / c / 1e6, t / hz / c * 1000, n / d / 1e7, x / d }'
}

free8=$(scenario free8 --gpus 8 --free)
h1=$(scenario h1 --gpus 1)
h8=$(scenario h8 --gpus 8)
h8p=$(scenario h8p --gpus 8 --pids "$pids" --procs-per-gpu 2)
h16p=$(scenario h16p --gpus 16 --pids "$pids" --procs-per-gpu 2)
m8=$(scenario m8 --gpus 8 --pids "$pids" --procs-per-gpu 7 --mig 7)
m16=$(scenario m16 --gpus 16 --pids "$pids" --procs-per-gpu 7 --mig 7)
row "8 GPUs, free NVML calls (gpufleet alone)" "$free8"
row "1 GPU, H100 call costs (the lent H100: 6.7 ms)" "$h1"
row "8 GPUs, H100 call costs" "$h8"
row "8 GPUs, costs, 16 GPU processes" "$h8p"
row "  the same, 2 000 ended leases in the store" "$h8p" leases
row "16 GPUs, costs, 32 GPU processes" "$h16p"
row "8 GPUs x 7 MIG instances, 56 processes" "$m8"
row "16 GPUs x 7 MIG instances, 112 processes" "$m16"
if [[ -n ${PERF:-} ]]; then
  # gpufleet's own work, without the NVML spin (which shows as clock_gettime in the kernel).
  row "profiled: 8 GPUs, free calls, 16 GPU processes" "$(scenario free8p --gpus 8 --pids "$pids" --procs-per-gpu 2 --free)" perf
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n ${PERF:-} ]]; then
  echo "== profile of the agent, 8 GPUs, free NVML calls, 16 GPU processes (perf report --no-children, top entries)"
  { perf report -i "$perf_data" --no-children --stdio --no-call-graph 2>/dev/null | grep -E '^ +[0-9.]+%' |
    cut -c1-150 | head -25; } || true
  echo "-- gpufleet's functions, with what they call (--children)"
  { perf report -i "$perf_data" --children --stdio --no-call-graph 2>/dev/null | grep -E '^ +[0-9.]+%' |
    grep -E 'gf::' | grep -v '_State_impl' | cut -c1-150 | head -30; } || true
fi
