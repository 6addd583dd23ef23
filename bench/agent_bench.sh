#!/usr/bin/env bash
# Lease round trip (acquire 1 GPU + release, 8 simulated GPUs, N times): through the node's agent socket,
# and today's direct store path in one process. Usage: bench/agent_bench.sh [N] (GF_BENCH_BUILD: build dir)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${GF_BENCH_BUILD:-build}
N=${1:-2000}
cmake --build "$B" --target gpufleet gf_bench_agent_lease >/dev/null
dir=$(mktemp -d /tmp/gf-agent-bench.XXXXXX)
agent=
cleanup() { [ -n "$agent" ] && kill "$agent" 2>/dev/null && wait "$agent" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
export GPUFLEET_SIM_SCENARIO=$PWD/tests/fixtures/sim/two_idle.json
"$B/gpufleet" --backend sim --sim-gpus 8 serve --listen 127.0.0.1:0 --no-history \
  --socket "$dir/agent.sock" --db "$dir/agent.db" 2>"$dir/agent.log" &
agent=$!
for _ in $(seq 100); do [ -S "$dir/agent.sock" ] && break; sleep 0.1; done
[ -S "$dir/agent.sock" ] || { cat "$dir/agent.log"; exit 1; }
"$B/bench/gf_bench_agent_lease" agent "$dir/agent.sock" "$N"
"$B/bench/gf_bench_agent_lease" direct "$dir/direct.db" "$N"
