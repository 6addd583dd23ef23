#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus`) scrapes `gpufleet serve` on loopback, and PromQL answers are checked
# against what the agent was told to simulate and what it serves itself.
#
#   GF_BINARY=build/gpufleet tests/integration/prometheus_test.sh
#
# The agent runs the sim backend with a scenario of two GPUs whose load never changes, so every value below is
# exact: utilization 37 % and 64 %, memory used 12345 and 2048 MiB of 81559 MiB, power limit 700 W and 300 W.
# Everything runs on free loopback ports with a temporary directory, and is stopped by pid on every exit path.
set -euo pipefail

GF_BINARY=${GF_BINARY:?set GF_BINARY to the gpufleet binary}
PROMETHEUS=${GF_PROMETHEUS:-prometheus}
command -v "$PROMETHEUS" >/dev/null || { echo "FAIL: '$PROMETHEUS' not found (scripts/install-deps.sh installs Debian's prometheus)" >&2; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl not found" >&2; exit 1; }

T=$(mktemp -d /tmp/gf-prometheus-test.XXXXXX)
pids=()
failed=""
cleanup() {
  local p
  if [[ -n $failed ]]; then  # the logs as they were when the check failed, before anything is stopped
    echo "---- agent log (last 20 lines)" >&2; tail -20 "$T/agent.log" >&2 2>/dev/null || true
    echo "---- prometheus log (last 10 lines)" >&2; tail -10 "$T/prometheus.log" >&2 2>/dev/null || true
    echo "FAIL: $failed" >&2
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  failed="$*"
  echo "FAIL: $*" >&2
  exit 1
}
pass() { echo "ok: $*"; }

free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' && return
  fi
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
  done
}

# ---- the agent
cat >"$T/scenario.json" <<'EOF'
{
  "gpus": [
    {"load": [{"t": 0, "utilization": 37, "memory_used_mib": 12345}]},
    {"power_limit_w": 300, "idle_power_w": 30, "load": [{"t": 0, "utilization": 64, "memory_used_mib": 2048}]}
  ]
}
EOF
"$GF_BINARY" --backend sim --sim-scenario "$T/scenario.json" serve --listen 127.0.0.1:0 --port-file "$T/agent.port" \
  --db "$T/agent.db" --interval 1 >"$T/agent.log" 2>&1 &
AGENT=$!
pids+=("$AGENT")
for _ in $(seq 1 200); do
  [[ -s $T/agent.port ]] && break
  kill -0 "$AGENT" 2>/dev/null || fail "gpufleet serve exited before listening"
  sleep 0.05
done
[[ -s $T/agent.port ]] || fail "gpufleet serve wrote no port file within 10 s"
AP=$(tr -d '[:space:]' <"$T/agent.port")
A=http://127.0.0.1:$AP
for _ in $(seq 1 100); do curl -sf -o /dev/null "$A/metrics" && break; sleep 0.1; done
curl -sf -o "$T/metrics.txt" "$A/metrics" || fail "the agent does not answer GET $A/metrics"
pass "agent listening on 127.0.0.1:$AP"

# ---- Prometheus (a port taken between free_port and its bind is retried)
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpufleet
    static_configs:
      - targets: ['127.0.0.1:$AP']
EOF
PROM_PID=
for attempt in 1 2 3; do
  PP=$(free_port)
  "$PROMETHEUS" --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
    --web.listen-address=127.0.0.1:$PP >"$T/prometheus.log" 2>&1 &
  PROM_PID=$!
  pids+=("$PROM_PID")
  for _ in $(seq 1 200); do
    curl -sf -o /dev/null "http://127.0.0.1:$PP/-/ready" && break 2
    kill -0 "$PROM_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill "$PROM_PID" 2>/dev/null || true
  wait "$PROM_PID" 2>/dev/null || true
  [[ $attempt -eq 3 ]] && fail "prometheus did not become ready (3 attempts)"
done
P=http://127.0.0.1:$PP
pass "prometheus $("$PROMETHEUS" --version 2>&1 | awk 'NR == 1 { print $3 }') ready on 127.0.0.1:$PP"

# ---- the target is up (scraped at least once, successfully)
up=0
for _ in $(seq 1 150); do
  targets=$(curl -sf "$P/api/v1/targets?state=active" || true)
  if grep -q '"health":"up"' <<<"$targets"; then up=1; break; fi
  sleep 0.2
done
[[ $up -eq 1 ]] || fail "the gpufleet target is not up after 30 s; /api/v1/targets: $(grep -o '"lastError":"[^"]*"' <<<"$targets" | head -1)"
pass "target 127.0.0.1:$AP is up"

# query EXPR: sets ANSWER to the value of its only sample ("" when the answer has no sample) and ANSWER_JSON to
# the whole reply; fails on an error or more than one sample. (Not a $(...) function: fail must end this shell.)
ANSWER= ANSWER_JSON=
query() {
  local n
  ANSWER_JSON=$(curl -sfG --data-urlencode "query=$1" "$P/api/v1/query") || fail "query '$1': HTTP error"
  grep -q '"status":"success"' <<<"$ANSWER_JSON" || fail "query '$1': $ANSWER_JSON"
  # grep finds nothing in an answer without samples: with pipefail that must not end the script.
  n=$(grep -o '"value":\[' <<<"$ANSWER_JSON" | wc -l || true)
  [[ $n -le 1 ]] || fail "query '$1' returned $n samples, expected one: $ANSWER_JSON"
  ANSWER=$(sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' <<<"$ANSWER_JSON")
}
# expect EXPR VALUE: waits up to 10 s for the answer (a series appears one scrape after the target is up).
expect() {
  for _ in $(seq 1 50); do
    query "$1"
    [[ $ANSWER == "$2" ]] && { pass "$1 = $2"; return; }
    sleep 0.2
  done
  fail "$1: expected $2, Prometheus answered '${ANSWER:-no sample}'"
}

expect 'up{job="gpufleet"}' 1
expect 'count(DCGM_FI_DEV_GPU_UTIL)' 2
# dcgm-exporter's labels, with the sim backend's values (modelName is the sim's default name).
expect 'count(DCGM_FI_DEV_GPU_UTIL{gpu=~"0|1",UUID=~"GPU-.+",pci_bus_id=~"[0-9A-F]{8}:[0-9A-F]{2}:00.0",device=~"nvidia[01]",modelName="Simulated H100 80GB HBM3",Hostname!=""})' 2
expect 'DCGM_FI_DEV_GPU_UTIL{gpu="0",device="nvidia0"}' 37
expect 'DCGM_FI_DEV_GPU_UTIL{gpu="1",device="nvidia1"}' 64
expect 'DCGM_FI_DEV_FB_USED{gpu="0"}' 12345
expect 'DCGM_FI_DEV_FB_FREE{gpu="1"}' $((81559 - 2048))
expect 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="1"}' 300
# free + used = total, per GPU, matched on the gpu label across families.
expect 'count((DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_USED) == on(gpu) gpufleet_gpu_memory_total_mib)' 2
expect 'sum(gpufleet_gpu_memory_total_mib)' $((2 * 81559))
expect 'count(gpufleet_collections_total > 0)' 1
expect 'count(gpufleet_agent_info{backend="sim"})' 1

# gzip (issue 24): Prometheus asks every scrape for `Accept-Encoding: gzip` (2.42 sends exactly that header). The
# agent answers it gzip-encoded, the encoded text is the plain text, and Prometheus ingests every series of it:
# the samples of its last scrape equal the sample lines of the plain text. (Before the lease below, which adds
# the per-user series.)
curl -sf -D "$T/gz.head" -H 'Accept-Encoding: gzip' -o "$T/metrics.gz" "$A/metrics" || fail "GET /metrics with gzip failed"
grep -qi '^content-encoding: gzip' "$T/gz.head" || fail "/metrics asked with Accept-Encoding: gzip is not gzip-encoded: $(tr -d '\r' <"$T/gz.head" | tr '\n' ' ')"
grep -qi '^vary: accept-encoding' "$T/gz.head" || fail "/metrics with gzip has no Vary: Accept-Encoding"
[[ $(head -c 2 "$T/metrics.gz" | od -An -tx1 | tr -d ' ') == 1f8b ]] || fail "/metrics with gzip does not start with gzip's magic"
curl -sf -D "$T/plain.head" -H 'Accept-Encoding: gzip;q=0' -o "$T/metrics.plain" "$A/metrics" || fail "GET /metrics (gzip;q=0) failed"
grep -qi '^content-encoding' "$T/plain.head" && fail "/metrics with gzip;q=0 is encoded anyway"
samples() { grep -v '^#' "$1" | grep -c . || true; }
plain_samples=$(samples "$T/metrics.plain")
gzip -dc "$T/metrics.gz" >"$T/metrics.unzipped" || fail "/metrics with gzip does not decompress"
[[ $(samples "$T/metrics.unzipped") -eq $plain_samples ]] ||
  fail "/metrics with gzip has $(samples "$T/metrics.unzipped") samples, the plain text $plain_samples"
series() { grep -v '^#' "$1" | sed 's/ [^ ]*$//' | sort; }  # the series, without their values
cmp -s <(series "$T/metrics.unzipped") <(series "$T/metrics.plain") ||
  fail "/metrics with gzip has other series than the plain text: $(diff <(series "$T/metrics.unzipped") <(series "$T/metrics.plain") | head -5)"
[[ $plain_samples -gt 50 ]] || fail "the plain /metrics has only $plain_samples samples"
expect "scrape_samples_scraped{job=\"gpufleet\"}" "$plain_samples"
expect "count({job=\"gpufleet\",__name__!~\"up|scrape_.*\"})" "$plain_samples"
pass "Prometheus' gzip scrapes: $plain_samples samples, as many as the plain text has ($(wc -c <"$T/metrics.gz") bytes gzip, $(wc -c <"$T/metrics.plain") plain)"

# What Prometheus stored agrees with the agent's own JSON API: the same UUIDs and utilizations.
curl -sf -o "$T/gpu-metrics.json" "$A/api/v1/monitoring/gpu-metrics" || fail "GET /api/v1/monitoring/gpu-metrics failed"
json=$(tr -d ' \n\t' <"$T/gpu-metrics.json")
for gpu in 0 1; do
  query "DCGM_FI_DEV_GPU_UTIL{gpu=\"$gpu\"}"
  util=$ANSWER
  uuid=$(sed -n 's/.*"UUID":"\([^"]*\)".*/\1/p' <<<"$ANSWER_JSON")
  [[ -n $uuid && -n $util ]] || fail "no UUID label or no value on DCGM_FI_DEV_GPU_UTIL{gpu=\"$gpu\"}: $ANSWER_JSON"
  grep -q "\"uuid\":\"$uuid\"" <<<"$json" || fail "UUID $uuid (gpu $gpu in Prometheus) is not in the agent's gpu-metrics JSON"
  grep -qE "\"utilization\":(\\{[^}]*)?$util[,}]" <<<"$json" ||
    fail "utilization $util of gpu $gpu in Prometheus is not in the agent's gpu-metrics JSON"
  pass "gpu $gpu: Prometheus and /api/v1/monitoring/gpu-metrics agree (UUID $uuid, utilization $util)"
done

# Per-user accounting (issue 12): a lease taken through the API shows up as the owner's counters, and
# Prometheus parses the user-labelled families (busy grows: GPU 0 runs at 37 %, over the 5 % threshold).
TOKEN=$(tr -d '[:space:]' <"$T/agent.token")
curl -sf -o /dev/null -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d '{"gpus": 1, "min_memory_mb": 0, "max_utilization": 100}' "$A/api/v1/allocations" ||
  fail "POST /api/v1/allocations failed"
expect 'count(gpufleet_user_gpu_held_seconds_total{user!=""} > 1)' 1
expect 'count(gpufleet_user_gpu_busy_seconds_total > 1)' 1
expect 'count(gpufleet_user_energy_joules_total > 0)' 1

echo "prometheus_test: all checks passed"
