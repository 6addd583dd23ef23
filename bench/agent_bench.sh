#!/usr/bin/env bash
# Lease round trip (acquire 1 GPU + release, 8 simulated GPUs, N times): through the node's agent socket,
# and today's direct store path in one process. Usage: bench/agent_bench.sh [N] (GF_BENCH_BUILD: build dir)
#
# Then the lease path under contention (issue 24, goal 4): CLIENTS (200) connections to the agent socket,
# each acquiring 1 GPU (queued when none is free) and releasing it, for SECONDS (60 per row, 7 rows: ~8
# minutes; QUICK=1: 10 s per row, ~2 minutes), on 8 simulated GPUs (most clients wait: grant latency and wait are
# reported apart) and on 256 (every client finds a free GPU), closed loop and paced (PACE per client per
# s). The load tool keeps its own ledger of who holds which GPU (a GPU granted while a client of the tool
# still holds it fails the run) and its grant count is compared with the leases the
# agent's store recorded. The direct path (a store connection per client, as 200 CLIs) runs the same load.
#   GF_BINARY= runs another gpufleet as the agent; CONTEND_ONLY=1 skips the round trip; CLIENTS=, SECONDS_RUN=, PACE= override; ROWS="256-0-5 ..." runs only
#   those rows (GPUS-HOLD_MS-RATE); DIRECT=0 leaves out the direct store path.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${GF_BENCH_BUILD:-build}
AGENT=${GF_BINARY:-$B/gpufleet}  # the agent under test (GF_BINARY: another build's, for a before/after)
N=${1:-2000}
CLIENTS=${CLIENTS:-200}
SECONDS_RUN=${SECONDS_RUN:-60}
[[ -n ${QUICK:-} ]] && SECONDS_RUN=10
cmake --build "$B" --target gpufleet gf_bench_agent_lease >/dev/null
dir=$(mktemp -d /tmp/gf-agent-bench.XXXXXX)
agent=
cleanup() { [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
export GPUFLEET_SIM_SCENARIO=$PWD/tests/fixtures/sim/two_idle.json
# start_agent GPUS TAG: an agent on GPUS simulated GPUs, its socket and store under $dir/TAG.*
start_agent() {
  nice -n -15 "$AGENT" --backend sim --sim-gpus "$1" serve --listen 127.0.0.1:0 --no-history \
    --socket "$dir/$2.sock" --db "$dir/$2.db" 2>"$dir/$2.log" &
  agent=$!
  for _ in $(seq 100); do [ -S "$dir/$2.sock" ] && break; sleep 0.1; done
  [ -S "$dir/$2.sock" ] || { cat "$dir/$2.log"; exit 1; }
}
stop_agent() { kill "$agent" && wait "$agent" 2>/dev/null || true; agent=; }
cpu_s() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }  # user+system, 100 Hz ticks

if [[ -z ${CONTEND_ONLY:-} ]]; then
  start_agent 8 agent
  "$B/bench/gf_bench_agent_lease" agent "$dir/agent.sock" "$N"
  "$B/bench/gf_bench_agent_lease" direct "$dir/direct.db" "$N"
  stop_agent
fi

# GPUS HOLD_MS RATE: 8 GPUs, released at once (most clients queue); 256, released at once (a closed loop
# with no think time: the latency is the clients' count over the agent's throughput); 256, each GPU held
# 1 s (200 acquires a second offered, none queued); 256, paced: each client acquires RATE times a second
# (PACE, default 5: 1 000 acquires and 1 000 releases a second from 200 clients), open loop, latency
# counted from each acquire's due time (the per-request p99 under a steady load).
PACE=${PACE:-5}
for cfg in "8 0 0" "256 0 0" "256 1000 0" "256 0 $PACE"; do
  read -r gpus hold rate <<<"$cfg"
  [[ -z ${ROWS:-} || " $ROWS " == *" $gpus-$hold-$rate "* ]] || continue
  tag=c$gpus-$hold-$rate
  shape=$([[ $rate == 0 ]] && echo "closed loop" || echo "paced, $rate acquires/s per client")
  echo "== contention: $CLIENTS clients, $shape, 1 GPU each held ${hold} ms, ${SECONDS_RUN} s, $gpus simulated GPUs (load $(cut -d' ' -f1-3 /proc/loadavg))"
  start_agent "$gpus" "$tag"
  c0=$(cpu_s "$agent")
  "$B/bench/gf_bench_agent_lease" contend "$dir/$tag.sock" "$CLIENTS" "$SECONDS_RUN" "$tag" "$hold" "$rate" | tee "$dir/$tag.out" || true
  echo "agent CPU: $(awk -v a="$c0" -v b="$(cpu_s "$agent")" -v s="$SECONDS_RUN" 'BEGIN { printf "%.2f s = %.0f %% of one core", b - a, (b - a) / s * 100 }')"
  stop_agent
  tool=$(sed -n 's/^ledger grants //p' "$dir/$tag.out")
  read -r store ended open < <(sqlite3 -separator ' ' "$dir/$tag.db" \
    "SELECT count(*), count(released_ms), (SELECT count(*) FROM lease_gpus WHERE active = 1) FROM leases WHERE name = '$tag'")
  verdict=$([[ $tool == "$store" ]] && echo "every lease in the ledger" || echo "MISMATCH")
  echo "ledger: the tool counted $tool grants; the agent's store holds $store leases ($ended ended, $open GPUs still leased): $verdict"
  [[ $hold == 0 && ${DIRECT:-1} != 0 ]] || continue
  echo "-- the direct store path, same load ($CLIENTS store connections, $gpus GPUs, $shape)"
  "$B/bench/gf_bench_agent_lease" direct-contend "$dir/d$tag.db" "$CLIENTS" "$SECONDS_RUN" "$gpus" "$rate" | tee "$dir/d$tag.out" || true
  tool=$(sed -n 's/^ledger grants //p' "$dir/d$tag.out")
  store=$(sqlite3 "$dir/d$tag.db" "SELECT count(*) FROM leases WHERE name = 'direct-contend'")
  echo "ledger: the tool counted $tool grants; the store holds $store leases"
done
