#!/usr/bin/env bash
# What the fleet's health query costs Prometheus beside the six others (issue 21): a fleet of NODES × 8
# GPUs as static pages in dcgm-exporter's format, now with the health families every GPU exports
# (DCGM_FI_DEV_XID_ERRORS, DCGM_FI_DEV_ROW_REMAP_FAILURE, gpufleet_gpu_health{state}), 1 % of the GPUs
# with a critical XID. Each of `gpufleet cluster`'s seven instant queries is timed RUNS times with curl
# (Prometheus' own time, nothing of gpufleet), and one `cluster select` end to end.
#
#   GF_BINARY=build/gpufleet bench/health_query_bench.sh [NODES] [RUNS]     (default 1000 10; ~1 min)
set -euo pipefail
GF_BINARY=${GF_BINARY:-build/gpufleet}
NODES=${1:-1000}
RUNS=${2:-10}
PAGES=10
T=$(mktemp -d /tmp/gf-health-bench.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

mkdir -p "$T/www"
python3 - "$T/www" "$NODES" "$PAGES" <<'PY'
import random, sys
out, nodes, pages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(7)
per = (nodes + pages - 1) // pages
metrics = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
           "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpufleet_gpu_health"]
for p in range(pages):
    rows = {m: [] for m in metrics}
    for n in range(p * per, min(nodes, (p + 1) * per)):
        for g in range(8):
            util, used = rnd.randrange(100), rnd.randrange(81559)
            xid = rnd.choice([79, 13]) if rnd.random() < 0.01 else 0
            labels = (f'gpu="{g}",UUID="GPU-{n:05d}-{g}",pci_bus_id="00000000:{g:02X}:00.0",device="nvidia{g}",'
                      f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-{n:05d}"')
            state = "unhealthy" if xid == 79 else "ok"
            for m, v in zip(metrics, [util, used, 81559 - used, 30 + util // 2, 100 + util * 6, xid, 0, 1]):
                rows[m].append(f'{m}{{{labels},state="{state}"}} {v}' if m == "gpufleet_gpu_health"
                               else f"{m}{{{labels}}} {v}")
    with open(f"{out}/p{p}.txt", "w") as f:
        for m in metrics:
            f.write(f"# HELP {m} {m}.\n# TYPE {m} gauge\n" + "\n".join(rows[m]) + "\n")
PY
WP=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$WP" >"$T/http.log" 2>&1 &
pids+=("$!")
{
  echo "global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 2s}"
  echo "scrape_configs:"
  for p in $(seq 0 $((PAGES - 1))); do
    echo "  - {job_name: dcgm-$p, metrics_path: /p$p.txt, static_configs: [{targets: ['127.0.0.1:$WP']}]}"
  done
} >"$T/prometheus.yml"
PP=$(free_port)
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" --web.listen-address=127.0.0.1:$PP >"$T/prometheus.log" 2>&1 &
pids+=("$!")
P=http://127.0.0.1:$PP
want=$((NODES * 8))
got=
for _ in $(seq 1 300); do
  got=$(curl -sfG --data-urlencode 'query=count(gpufleet_gpu_health)' "$P/api/v1/query" 2>/dev/null |
        sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' || true)
  [[ $got == "$want" ]] && break
  sleep 0.2
done
[[ $got == "$want" ]] || { echo "Prometheus has ${got:-no} health series after 60 s, expected $want" >&2; exit 1; }
sleep 2

L=Hostname
queries=(
  "max by ($L, gpu, UUID, modelName) (DCGM_FI_DEV_GPU_UTIL)"
  "max by ($L, gpu, UUID) (DCGM_FI_DEV_FB_USED{GPU_I_ID=\"\"}) or sum by ($L, gpu, UUID) (DCGM_FI_DEV_FB_USED)"
  "max by ($L, gpu, UUID) (DCGM_FI_DEV_GPU_TEMP)"
  "max by ($L, gpu, UUID) (timestamp(DCGM_FI_DEV_GPU_UTIL))"
  "max by ($L, gpu, UUID, __name__, state) ({__name__=~\"DCGM_FI_DEV_XID_ERRORS|DCGM_FI_DEV_ROW_REMAP_FAILURE|gpufleet_gpu_health\",state!~\"ok|error\"} != 0)"
)
names=(utilization fb_used temperature sample_time health)
echo "== $NODES nodes × 8 GPUs ($want series per family, 8 families), $RUNS runs per query; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!queries[@]}"; do
  ts=()
  for _ in $(seq 1 "$RUNS"); do
    ts+=("$(curl -sfG -o "$T/answer" -w '%{time_total}' --data-urlencode "query=${queries[$i]}" "$P/api/v1/query")")
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
