#!/usr/bin/env bash
# Every measurement behind bench/RESULTS.md, in one run on one machine. Usage: bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { scripts/install-deps.sh; apt-get install -y -qq --no-install-recommends hyperfine; }

B=build-bench
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $B --target gpufleet gf_bench gf_bench_allocator gf_bench_scheduler gf_bench_fleet gf_bench_agent_lease fake_nvml >/dev/null

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
echo "== 1. one 8-GPU snapshot: NVML (fake library) vs nvidia-smi (fake script), and the layers above"
$B/bench/gf_bench --benchmark_min_time=0.5

export GPUFLEET_NVML_LIBRARY=$PWD/$B/tests/libnvidia-ml-fake.so
export FAKE_NVML_SCENARIO=$PWD/tests/fixtures/nvml/eight_gpus.json
export GPUFLEET_NVIDIA_SMI=$PWD/tests/fakes/fake-nvidia-smi
export NO_COLOR=1

echo "== 2. sampler CPU use at 10 Hz for 8 GPUs over 10 s (user+system seconds of gpufleet and its children)"
TIMEFORMAT='%U %S'
for backend in nvml nvidia-smi; do
  t=$( { time $B/gpufleet --backend $backend monitor -n 0.1 --no-series -o /tmp/gf-bench-$backend.json -- sleep 10 >/dev/null 2>&1; } 2>&1 )
  samples=$(grep -o '"sample_count": [0-9]*' /tmp/gf-bench-$backend.json | head -1 | grep -o '[0-9]*$')
  awk -v b=$backend -v t="$t" -v n="$samples" 'BEGIN { split(t, a, " "); cpu = a[1] + a[2];
    printf "%-10s samples %s  cpu %.3f s  = %.2f %% of one core\n", b, n, cpu, cpu / 10 * 100 }'
done

echo "== 3. cold start of 'gpufleet status --json' (8 GPUs)"
hyperfine -N --warmup 3 --runs 40 --style basic \
  "$B/gpufleet --backend nvml status --json" \
  "$B/gpufleet --backend nvidia-smi status --json" \
  "$B/gpufleet --backend sim status --json"

echo "== 4. GPU selection (pure allocator): 8 GPUs choose 1/2/4, 64 GPUs choose 1/8"
$B/bench/gf_bench_allocator --benchmark_min_time=0.2

echo "== 5. queue: dispatch the head of 10 000 waiting jobs; release -> next waiting job started"
$B/bench/gf_bench_scheduler

echo "== 6. gpufleet serve: HTTP (wrk) against a bare Beast server and prometheus-node-exporter; WebSocket fan-out"
GF_BENCH_BUILD=$B bench/http_bench.sh

echo "== 7. fleet ranking: 1 000 and 10 000 nodes x 8 GPUs (summaries + selection)"
$B/bench/gf_bench_fleet --benchmark_min_time=0.5

echo "== 8. one 'cluster select' through a real Prometheus, 1 000 nodes x 8 GPUs"
GF_BINARY=$B/gpufleet bench/cluster_bench.sh 1000 10

echo "== 9. lease round trip (acquire + release, 8 sim GPUs, N=2000): through the agent socket vs the direct store"
GF_BENCH_BUILD=$B bench/agent_bench.sh 2000

# --- issue 21, the nvidia-smi path's paced health queries (remapped rows, -q -x counters, /dev/kmsg XIDs):
# CPU per collection of `monitor` on the fake's 8 GPUs, this build only (give a second binary as "before"
# to compare: bench/smi_health_bench.sh AFTER BEFORE).
echo "== 13. nvidia-smi path: CPU per collection with the paced health queries, 8 GPUs, 5 Hz for 65 s"
bench/smi_health_bench.sh $B/gpufleet

# ---- issue 21, GPM per MIG instance (helper w-migpm): GPM sampling CPU, 8 GPUs, then the same GPUs in MIG
# mode with 7 GPU instances each, on the fake NVML with the real H100's call costs (~3 min; MIG_ONLY=1
# runs only the MIG rows).
echo "== 14. GPM sampling CPU: 8 GPUs, and 8 GPUs x 7 MIG GPU instances"
GF_BENCH_BUILD=$B bench/gpm_bench.sh 20

# ---- issue 24, goal 2 (helper "live"): 10 000 live clients on 2 cores: /ws, Socket.IO over WebSocket, Socket.IO
# on long-polling, each against a fresh agent, with a gpu-metrics latency probe; ~3 minutes (QUICK=1: ~1 minute).
echo "== 24.2 (issue 24, goal 2) live clients: 10 000 /ws, 10 000 Socket.IO (WebSocket), 1 000 Socket.IO (polling), at 1 Hz"
GF_BENCH_BUILD=$B CASES="ws sio polling" bench/live_clients.sh

# ---- issue 24, goal 5: the cost of collection (bench/collect_bench.sh; ~4 min, QUICK=1: ~1.5 min) ----
echo "== 24.5 the agent's CPU per collection at 1 Hz: 8 and 16 GPUs, GPU processes, MIG, a store with lease history"
GF_BENCH_BUILD=$B PERF=1 bench/collect_bench.sh

# Issue 24, goals 3 and 4 (helper "fleet"): the fleet at 10 000 nodes and the lease path under contention.
# 8b takes ~4 minutes (Prometheus ingests 400 000 series before the first query); 9b ~6 minutes (QUICK=1: ~1.5).
echo "== 8b. 'cluster select' through a real Prometheus, 10 000 nodes x 8 GPUs; 8c. the agent's fleet view of them (wrk)"
GF_BINARY=$B/gpufleet bench/cluster_bench.sh 10000 5
echo "== 8d. Kubernetes lists of 10 000 nodes and 100 000 pods, paginated, against the stand-in"
cmake --build $B --target standin >/dev/null
GF_BINARY=$B/gpufleet GF_STANDIN=$B/tests/standin bench/kube_list_bench.sh 10000 100000 3
echo "== 9b. 200 clients acquiring and releasing 1 GPU each through the agent (8 and 256 GPUs) vs the direct store"
GF_BENCH_BUILD=$B CONTEND_ONLY=1 bench/agent_bench.sh

# --- issue 21, the fleet's health query through Prometheus: the seven instant queries' own time (curl) on
# a fleet whose every GPU exports XID_ERRORS, ROW_REMAP_FAILURE and gpufleet_gpu_health, 1 % with an XID.
echo "== 15. fleet health through Prometheus: each instant query's time, 1 000 nodes x 8 GPUs"
GF_BINARY=$B/gpufleet bench/health_query_bench.sh 1000 10

# ---- issue 24, goal 4 (helper "lease"): the lease path under contention. 9b above now runs 7 rows (the
# closed loop and, new, the paced shape: 200 clients x PACE=5 acquires/s, open loop) in ~9 minutes at 60 s
# a row (QUICK=1: 10 s a row, ~2.5 minutes; the direct path with 8 GPUs always takes ~65 s: its queued
# clients give up after 60 s). 9c: the paced row again at twice the rate (2 000 acquires/s offered).
echo "== 9c. 200 clients paced at 10 acquires/s each (2 000/s), 256 GPUs, through the agent vs the direct store"
GF_BENCH_BUILD=$B CONTEND_ONLY=1 ROWS="256-0-10" PACE=10 bench/agent_bench.sh

# ---- issue 24, goal 2, permessage-deflate (helper "live", second session): 10 000 /ws and 10 000 Socket.IO
# clients again, offering permessage-deflate (one deflated frame shared by all), for the bytes and the CPU
# beside the plain cases of 24.2 (~2 minutes: two fresh agents).
echo "== 24.2d live clients with permessage-deflate: 10 000 /ws, 10 000 Socket.IO (WebSocket), at 1 Hz"
GF_BENCH_BUILD=$B CASES="ws-deflate sio-deflate" bench/live_clients.sh

# ---- issue 24, goal 2, the plain /ws gap (helper "24c"): 10 000 /ws and 10 000 Socket.IO clients with every
# update's arrival written down (DUMP=1), then the fan-out's rounds from it (~2 minutes: two fresh agents).
echo "== 24.2s the fan-out's rounds: 10 000 /ws and 10 000 Socket.IO clients at 1 Hz, each arrival kept"
GF_BENCH_BUILD=$B DUMP=1 CASES="ws sio" bench/live_clients.sh
python3 bench/live_rounds.py "${GF_LIVE_OUT:-/tmp/gf-live}/ws.arrivals" | tail -2
