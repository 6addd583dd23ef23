#!/usr/bin/env bash
# The exec source end to end: `gpufleet cluster gpus --exec-nvidia-smi` against the stand-in API server
# (bench/exec_standin.cpp) with NODES GPU nodes, each pod answering the recorded 8-GPU H100 CSV after
# DELAY_MS; process start, the node and pod lists, NODES WebSocket execs at most PARALLEL at once,
# parsing and ranking. Prints min/median/max per parallel bound, and the load average.
#
#   GF_BUILD=build bench/exec_bench.sh [NODES] [DELAY_MS] [RUNS] [PARALLEL…]
set -euo pipefail
B=${GF_BUILD:-build}
NODES=${1:-100}
DELAY=${2:-200}
RUNS=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
PARALLEL=("$@")
[ ${#PARALLEL[@]} -gt 0 ] || PARALLEL=(1 8 32)
T=$(mktemp -d /tmp/gf-exec-bench.XXXXXX)
exec 3> >(exec "$B/bench/gf_exec_standin" "$NODES" "$DELAY" tests/fixtures/nvidia_smi/query-gpu-normal.csv > "$T/url")
cleanup() { exec 3>&-; sleep 0.2; rm -rf "$T"; }
trap cleanup EXIT
for _ in $(seq 50); do [ -s "$T/url" ] && break; sleep 0.1; done
URL=$(cat "$T/url")
cat > "$T/kubeconfig" <<K
apiVersion: v1
kind: Config
clusters: [{name: s, cluster: {server: "$URL"}}]
users: [{name: u, user: {token: bench}}]
contexts: [{name: s, context: {cluster: s, user: u}}]
current-context: s
K
echo "nodes $NODES, exec answer after $DELAY ms, $RUNS runs; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for P in "${PARALLEL[@]}"; do
  times=()
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s%N)
    "$B/gpufleet" cluster gpus --kubeconfig "$T/kubeconfig" --exec-nvidia-smi --exec-parallel "$P" --json \
      > "$T/out.json" 2> "$T/err"
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  gpus=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$T/out.json")
  sorted=($(printf '%s\n' "${times[@]}" | sort -n))
  echo "parallel $P: min ${sorted[0]} ms, median ${sorted[$(( RUNS / 2 ))]} ms, max ${sorted[$(( RUNS - 1 ))]} ms ($gpus GPUs)"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
