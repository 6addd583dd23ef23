#!/usr/bin/env bash
# The agent's CPU per collection on a real GPU, for one or more builds side by side, alternated (A B A B)
# on the same machine in one run, plus what each NVML call costs there (idle and under a bf16 load).
# Run from the repository root, as root, on an idle GPU:
#
#   scripts/gpu-collect-cost.sh RESULT_DIR 'LABEL|BINARY|GLOBAL OPTIONS' ...
#   e.g. scripts/gpu-collect-cost.sh $OUT 'before|.dev/old/gpufleet|--gpm-interval 0' 'after|build/gpufleet|--gpm-interval 0'
#
# GF_LIB, if set, is put in LD_LIBRARY_PATH for gpufleet alone. SECONDS_EACH (default 30) is each window;
# ROUNDS (default 2) the alternations. Needs python3 with pynvml and torch. Writes RESULT_DIR/costs.tgz.
set -u
RESULT_DIR=$1
shift
PY=$PWD/scripts/gpu_validate.py
SECS=${SECONDS_EACH:-30}
W=$(mktemp -d)
D=$W/c
mkdir -p "$D" "$RESULT_DIR"
log() { echo "$(date -u +%T) $*" | tee -a "$D/steps.log"; }

log "costs idle"
timeout 120 python3 "$PY" costs >"$D/costs-idle.json" 2>"$D/costs-idle.err"
python3 "$PY" burn 25 >"$D/burn.json" 2>"$D/burn.err" &
BURN=$!
sleep 8
log "costs under load"
timeout 60 python3 "$PY" costs >"$D/costs-load.json" 2>"$D/costs-load.err"
wait $BURN
log "init costs"
timeout 60 python3 "$PY" init >"$D/init.json" 2>"$D/init.err"

# where a CLI snapshot's time goes: process start, NVML start and discovery, a reading with and without GPM
for spec in "$@"; do
  IFS='|' read -r label bin opts <<<"$spec"
  gf="env ${GF_LIB:+LD_LIBRARY_PATH=$GF_LIB} $bin"
  for what in version:--version backends:"--backend nvml backends --json" \
    status:"--backend nvml status --json" status-nogpm:"--backend nvml --gpm-interval 0 status --json"; do
    log "time $label ${what%%:*}"
    timeout 60 python3 "$PY" time 15 "$gf ${what#*:}" >"$D/time-$label-${what%%:*}.json" 2>&1
  done
done

for round in $(seq "${ROUNDS:-2}"); do
  for spec in "$@"; do
    IFS='|' read -r label bin opts <<<"$spec"
    bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    dir=$W/$label-$round
    mkdir -m 700 "$dir"
    # shellcheck disable=SC2086 # opts are words
    (
      cd "$dir" || exit
      if [ -n "${GF_LIB:-}" ]; then export LD_LIBRARY_PATH=$GF_LIB; fi
      setsid "$bin" $opts serve --listen 127.0.0.1:0 --port-file "$dir/port" --db "$dir/gf.db" --socket none \
        >/dev/null 2>"$D/serve-$label-$round.log" &
      echo $! >"$dir/pid"
    )
    for _ in $(seq 50); do [ -s "$dir/port" ] && break; sleep 0.2; done
    sleep 3
    log "agent $label round $round"
    timeout $((SECS + 30)) python3 "$PY" agent "http://127.0.0.1:$(cat "$dir/port")" "$(cat "$dir/pid")" "$SECS" \
      >"$D/agent-$label-$round.json" 2>"$D/agent-$label-$round.err"
    kill "$(cat "$dir/pid")"
    sleep 1
  done
done
tar czf "$RESULT_DIR/costs.tgz" -C "$W" c
log "results: $RESULT_DIR/costs.tgz"
