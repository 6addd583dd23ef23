#!/usr/bin/env bash
# One `gpufleet cluster select` through a real Prometheus for a fleet of 1 000 nodes × 8 GPUs, end to end
# (process start, the seven instant queries, parsing, joining, ranking). The fleet is static pages in
# dcgm-exporter's text format (bench/fleet_prometheus.sh: 10 pages, served by python3 -m http.server),
# scraped by Debian's prometheus every 2 s (10 s above 2 000 nodes). Goal: under 1 s for 1 000 nodes,
# 2 s for 10 000. HOLD=1 keeps the fleet up for profiling.
#
#   GF_BINARY=build/gpufleet bench/cluster_bench.sh [NODES] [RUNS]
set -euo pipefail
GF_BINARY=${GF_BINARY:-build/gpufleet}
NODES=${1:-1000}
RUNS=${2:-10}
source "$(dirname "$0")/fleet_prometheus.sh"
fleet_up
want=$((NODES * 8))
echo "== cluster select --gpus 4 through Prometheus: $NODES nodes × 8 GPUs ($want series per metric), $RUNS runs"
"$GF_BINARY" cluster select --gpus 4 --prometheus "$P" | grep -E "Selected node|Idle GPUs" || true
times=()
prom_cpu() { awk '{ print $14 + $15 }' "/proc/$PROM_PID/stat"; }  # clock ticks (1/100 s)
c0=$(prom_cpu)
for _ in $(seq 1 "$RUNS"); do
  s=$(date +%s%N)
  "$GF_BINARY" cluster select --gpus 4 --prometheus "$P" >/dev/null 2>&1 || true
  e=$(date +%s%N)
  times+=($(((e - s) / 1000000)))
done
c1=$(prom_cpu)
printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1; s += $1 } END {
  printf "wall ms: min %d  median %d  mean %.0f  max %d\n", a[1], a[int((NR + 1) / 2)], s / NR, a[NR] }'
# Prometheus' CPU per run (its queries, and the scrapes that fell in the runs: ~60 ms a second at 10 000 nodes).
echo "prometheus CPU per run: $(((c1 - c0) * 10 / RUNS)) ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
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
echo "RSS after the first refresh: $(rss_mib "$a1") MiB"
echo "== the agent's fleet view of $NODES nodes from its cache (wrk -t2 -c16, ${WRK_S} s each; load $(cut -d' ' -f1-3 /proc/loadavg))"
for route in nodes gpus; do
  curl -s "$V/$route" -o "$T/$route.json"
  echo "$route: $(($(stat -c %s "$T/$route.json") / 1024)) KiB, first request $(curl -s -o /dev/null -w '%{time_total}' "$V/$route") s"
  wrk -t2 -c16 -d"${WRK_S}s" "$V/$route" | grep -E "Requests/sec|Transfer/sec|Latency"
done
echo "RSS: $rss0 MiB without a fleet view, $(rss_mib "$a1") MiB with $NODES nodes after the runs"

