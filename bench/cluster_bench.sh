#!/usr/bin/env bash
# One `gpufleet cluster select` through a real Prometheus for a fleet of 1 000 nodes × 8 GPUs, end to end
# (process start, the five instant queries select asks, parsing, joining, ranking). The fleet is static pages in
# dcgm-exporter's text format (bench/fleet_prometheus.sh: 10 pages, served by python3 -m http.server),
# scraped by Debian's prometheus every 2 s (10 s above 2 000 nodes). Goal: under 1 s for 1 000 nodes,
# 2 s for 10 000. HOLD=1 keeps the fleet up for profiling.
# GF_BEFORE=OTHER/gpufleet: the same fleet also gets the three odd nodes of fleet_prometheus.sh (ODD=1: a
# stale GPU, MIG instances, a GPU without utilization); both binaries must print the same `cluster select`
# (text and --json, less the "collected" time; --timeout 120, so that a loaded machine does not fail it) for
# a few option sets, and the runs alternate the two binaries, each with its own wall times and Prometheus CPU.
#
#   GF_BINARY=build/gpufleet [GF_BEFORE=old/gpufleet] bench/cluster_bench.sh [NODES] [RUNS]
set -euo pipefail
GF_BINARY=${GF_BINARY:-build/gpufleet}
NODES=${1:-1000}
RUNS=${2:-10}
# shellcheck disable=SC2034  # ODD is read by fleet_prometheus.sh
[[ -n ${GF_BEFORE:-} ]] && ODD=1
source "$(dirname "$0")/fleet_prometheus.sh"
fleet_up
want=$((NODES * 8))
echo "== cluster select --gpus 4 through Prometheus: $NODES nodes × 8 GPUs ($want series per metric), $RUNS runs"
"$GF_BINARY" cluster select --gpus 4 --prometheus "$P" | grep -E "Selected node|Idle GPUs" || true
if [[ -n ${GF_BEFORE:-} ]]; then
  same=0
  for opts in "--gpus 4" "--gpus 8 --max-age 60" "--gpus 8 --fallback least-loaded" "--gpus 1 --max-age 0" \
    "--gpus 9" "--gpus 2 --gpu-resource amd.com/gpu" "--gpus 7 --utilization-threshold 95 --memory-threshold 99"; do
    for json in "" --json; do
      # shellcheck disable=SC2086  # the options are words
      a=$("$GF_BEFORE" cluster select $opts $json --timeout 120 --prometheus "$P" 2>&1 | grep -v '"collected"' || true)
      # shellcheck disable=SC2086
      b=$("$GF_BINARY" cluster select $opts $json --timeout 120 --prometheus "$P" 2>&1 | grep -v '"collected"' || true)
      if [[ $a != "$b" ]]; then
        echo "DIFFERENT: cluster select $opts $json" >&2
        diff <(echo "$a") <(echo "$b") | head -20 >&2
        exit 1
      fi
      same=$((same + 1))
    done
  done
  odd() {  # odd MAX_AGE: each odd node's health and idle GPUs
    { "$GF_BINARY" cluster select --gpus 8 --json --max-age "$1" --prometheus "$P" 2>/dev/null || true; } |
      python3 -c 'import json, sys; d = json.load(sys.stdin); print(" ".join("%s:%s:%s" % (c["node"], c["health"], c["idle_gpu_count"]) for c in d["candidates"] if c["node"].startswith("odd")))'
  }
  stale="--max-age 60: $(odd 60); --max-age 600: $(odd 600)"
  echo "same output from $GF_BEFORE and $GF_BINARY: $same commands; odd nodes (health:idle GPUs) $stale"
fi
prom_cpu() { awk '{ print $14 + $15 }' "/proc/$PROM_PID/stat"; }  # clock ticks (1/100 s)
summary() {  # summary LABEL CPU_TICKS MS…: the wall times' min, median, mean, max, and Prometheus' CPU per run
  local label=$1 ticks=$2
  shift 2
  printf '%s\n' "$@" | sort -n | awk -v l="$label" -v c="$ticks" '{ a[NR] = $1; s += $1 } END {
    printf "%s wall ms: min %d  median %d  mean %.0f  max %d; prometheus CPU per run %d ms\n", l, a[1],
      a[int((NR + 1) / 2)], s / NR, a[NR], c * 10 / NR }'
}
times=() before=() ticks=0 before_ticks=0
for _ in $(seq 1 "$RUNS"); do
  for bin in ${GF_BEFORE:+"$GF_BEFORE"} "$GF_BINARY"; do
    c0=$(prom_cpu)
    s=$(date +%s%N)
    "$bin" cluster select --gpus 4 --prometheus "$P" >/dev/null 2>&1 || true
    e=$(date +%s%N)
    c1=$(prom_cpu)
    if [[ $bin == "$GF_BINARY" ]]; then
      times+=($(((e - s) / 1000000)))
      ticks=$((ticks + c1 - c0))
    else
      before+=($(((e - s) / 1000000)))
      before_ticks=$((before_ticks + c1 - c0))
    fi
  done
done
# Prometheus' CPU per run: its queries, and the scrapes that fell in the runs (~60 ms a second at 10 000 nodes).
[[ -n ${GF_BEFORE:-} ]] && summary "before ($GF_BEFORE)" "$before_ticks" "${before[@]}"
summary "$GF_BINARY" "$ticks" "${times[@]}"
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
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

