#!/usr/bin/env bash
# What the fleet's health query costs Prometheus beside the others (issue 21): a fleet of NODES × 8
# GPUs as static pages in dcgm-exporter's format, now with the health families every GPU exports
# (DCGM_FI_DEV_XID_ERRORS, DCGM_FI_DEV_ROW_REMAP_FAILURE, gpufleet_gpu_health{state}), 1 % of the GPUs
# with a critical XID. Each of `gpufleet cluster`'s instant queries is timed RUNS times with curl, asking gzip as
# gpufleet does (Prometheus' own time, nothing of gpufleet), and one `cluster select` end to end.
#
#   GF_BINARY=build/gpufleet bench/health_query_bench.sh [NODES] [RUNS]     (default 1000 10; ~1 min)
set -euo pipefail
GF_BINARY=${GF_BINARY:-build/gpufleet}
NODES=${1:-1000}
RUNS=${2:-10}
HEALTH=1
SCRAPE=2s
source "$(dirname "$0")/fleet_prometheus.sh"
fleet_up
want=$((NODES * 8))

L=Hostname
# gpufleet's seven queries (src/cluster/prometheus_source.cpp, prometheus_queries), then the per-GPU sample
# times it asks only for nodes whose GPUs' times differ (every node's here: the worst case).
queries=(
  "max by ($L, gpu, UUID, modelName) (DCGM_FI_DEV_GPU_UTIL)"
  "max by ($L, gpu, UUID, GPU_I_ID) (DCGM_FI_DEV_FB_USED)"
  "max by ($L, gpu, UUID, GPU_I_ID) (DCGM_FI_DEV_FB_FREE)"
  "max by ($L, gpu, UUID) (DCGM_FI_DEV_GPU_TEMP)"
  "max by ($L, gpu, UUID) (DCGM_FI_DEV_POWER_USAGE)"
  "count_values by ($L) (\"gpufleet_sample_time\", timestamp(DCGM_FI_DEV_GPU_UTIL))"
  "max by ($L, gpu, UUID, __name__, state) ({__name__=~\"DCGM_FI_DEV_XID_ERRORS|DCGM_FI_DEV_ROW_REMAP_FAILURE|gpufleet_gpu_health\",state!~\"ok|error\"} != 0)"
  "max by ($L, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL))"
)
names=(utilization fb_used fb_free temperature power sample_time health gpu_times)
echo "== $NODES nodes × 8 GPUs ($want series per family, 8 families), $RUNS runs per query; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!queries[@]}"; do
  ts=()
  for _ in $(seq 1 "$RUNS"); do
    ts+=("$(curl -sfG --compressed -o "$T/answer" -w '%{time_total}' --data-urlencode "query=${queries[$i]}" "$P/api/v1/query")")
  done
  printf '%s\n' "${ts[@]}" | sort -n | awk -v n="${names[$i]}" -v b="$(wc -c <"$T/answer")" '{ a[NR] = $1 } END {
    printf "%-12s median %6.1f ms  min %6.1f ms  answer %8d bytes\n", n, a[int((NR + 1) / 2)] * 1000, a[1] * 1000, b }'
done
"$GF_BINARY" cluster nodes --json --prometheus "$P" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("unhealthy GPUs seen through Prometheus:", sum(n["unhealthy_gpus"] for n in d["nodes"]))'
/usr/bin/time -f 'cluster select end to end: %e s wall, %U s user + %S s system (gpufleet)' \
  "$GF_BINARY" cluster select --gpus 4 --prometheus "$P" >/dev/null || true
