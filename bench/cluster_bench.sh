#!/usr/bin/env bash
# One `gpufleet cluster select` through a real Prometheus for a fleet of 1 000 nodes × 8 GPUs, end to end
# (process start, the six instant queries, parsing, joining, ranking). The fleet is static pages in
# dcgm-exporter's text format (10 pages of 100 nodes each, served by python3 -m http.server), scraped
# by Debian's prometheus every 2 s (10 s above 2 000 nodes, so that ingesting 80 000 series per metric
# leaves the machine quiet between scrapes). Goal: under 1 s for 1 000 nodes, 2 s for 10 000.
#
#   GF_BINARY=build/gpufleet bench/cluster_bench.sh [NODES] [RUNS]
set -euo pipefail
GF_BINARY=${GF_BINARY:-build/gpufleet}
NODES=${1:-1000}
RUNS=${2:-10}
PAGES=10
SCRAPE=2s
((NODES > 2000)) && SCRAPE=10s
T=$(mktemp -d /tmp/gf-cluster-bench.XXXXXX)
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
metrics = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"]
for p in range(pages):
    rows = {m: [] for m in metrics}
    for n in range(p * per, min(nodes, (p + 1) * per)):
        host = f"gpu-node-{n:05d}"
        for g in range(8):
            util, used = rnd.randrange(100), rnd.randrange(81559)
            labels = (f'gpu="{g}",UUID="GPU-{n:05d}-{g}",pci_bus_id="00000000:{g:02X}:00.0",device="nvidia{g}",'
                      f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",DCGM_FI_DRIVER_VERSION="535.129.03"')
            for m, v in zip(metrics, [util, used, 81559 - used, 30 + util // 2, 100 + util * 6]):
                rows[m].append(f"{m}{{{labels}}} {v}")
    with open(f"{out}/p{p}.txt", "w") as f:
        for m in metrics:
            f.write(f"# HELP {m} {m}.\n# TYPE {m} gauge\n" + "\n".join(rows[m]) + "\n")
PY
WP=$(free_port)
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$WP" >"$T/http.log" 2>&1 &
pids+=("$!")
{
  echo "global: {scrape_interval: $SCRAPE, scrape_timeout: $SCRAPE, evaluation_interval: $SCRAPE}"
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
for _ in $(seq 1 900); do
  got=$(curl -sfG --data-urlencode 'query=count(timestamp(DCGM_FI_DEV_GPU_UTIL))' "$P/api/v1/query" 2>/dev/null |
        sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' || true)
  [[ $got == "$want" ]] && break
  sleep 0.2
done
[[ $got == "$want" ]] || { echo "Prometheus has ${got:-no} GPU series after 180 s, expected $want" >&2; tail -5 "$T/prometheus.log" >&2; exit 1; }
sleep "${SCRAPE%s}"  # every family scraped at least once more

if [[ -n ${HOLD:-} ]]; then  # keep the fleet up for profiling: HOLD=1 … prints the URL, serves until killed
  echo "prometheus $P (pid ${pids[1]})"
  sleep infinity
fi
echo "== cluster select --gpus 4 through Prometheus: $NODES nodes × 8 GPUs ($want series per metric), $RUNS runs"
"$GF_BINARY" cluster select --gpus 4 --prometheus "$P" | grep -E "Selected node|Idle GPUs" || true
times=()
for _ in $(seq 1 "$RUNS"); do
  s=$(date +%s%N)
  "$GF_BINARY" cluster select --gpus 4 --prometheus "$P" >/dev/null 2>&1 || true
  e=$(date +%s%N)
  times+=($(((e - s) / 1000000)))
done
printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1; s += $1 } END {
  printf "wall ms: min %d  median %d  mean %.0f  max %d\n", a[1], a[int((NR + 1) / 2)], s / NR, a[NR] }'
/usr/bin/time -f 'one run: %e s wall, %U s user + %S s system (gpufleet)' "$GF_BINARY" cluster select --gpus 4 --prometheus "$P" >/dev/null

# The agent's fleet view of the same fleet: /api/v1/cluster/nodes and /gpus served from its cache (the
# documents are rendered once per refresh), wrk for WRK_S seconds each; the memory the view takes is the
# RSS of this agent against the same agent without a fleet view. It runs from 5 000 nodes (VIEW=1: always;
# NO_VIEW=1: never).
if [[ -n ${NO_VIEW:-} ]] || { ((NODES < 5000)) && [[ -z ${VIEW:-} ]]; }; then exit 0; fi
WRK_S=${WRK_S:-10}
rss_mib() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }
serve_agent() {  # serve_agent PORTFILE ARGS…: an agent on an ephemeral port; prints its pid
  "$GF_BINARY" --backend sim serve --listen 127.0.0.1:0 --port-file "$1" --no-history --socket none "${@:2}" \
    >>"$T/serve.log" 2>&1 &
  echo $!
}
a0=$(serve_agent "$T/port0")
for _ in $(seq 100); do [[ -s $T/port0 ]] && break; sleep 0.1; done
sleep 1
rss0=$(rss_mib "$a0")
kill "$a0"; wait "$a0" 2>/dev/null || true
a1=$(serve_agent "$T/port1" --prometheus "$P" --timeout 120)
pids+=("$a1")
for _ in $(seq 100); do [[ -s $T/port1 ]] && break; sleep 0.1; done
V=http://127.0.0.1:$(cat "$T/port1")/api/v1/cluster
for _ in $(seq 1 600); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$V/nodes") == 200 ]] && break
  sleep 0.5
done
echo "== the agent's fleet view of $NODES nodes from its cache (wrk -t2 -c16, ${WRK_S} s each; load $(cut -d' ' -f1-3 /proc/loadavg))"
for route in nodes gpus; do
  curl -s "$V/$route" -o "$T/$route.json"
  echo "$route: $(($(stat -c %s "$T/$route.json") / 1024)) KiB, first request $(curl -s -o /dev/null -w '%{time_total}' "$V/$route") s"
  wrk -t2 -c16 -d"${WRK_S}s" "$V/$route" | grep -E "Requests/sec|Transfer/sec|Latency"
done
echo "RSS: $rss0 MiB without a fleet view, $(rss_mib "$a1") MiB with $NODES nodes after the runs"

