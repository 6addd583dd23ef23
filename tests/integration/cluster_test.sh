#!/usr/bin/env bash
# `gpufleet cluster` against real peers on loopback:
#   1. a real Prometheus (Debian's `prometheus`) scraping three `gpufleet --backend sim serve` agents with
#      different simulated loads: `cluster select` through Prometheus picks the node the seed's rules pick,
#      and the same through the agents directly (--agent, --agents FILE);
#   2. a second Prometheus scraping static pages in dcgm-exporter's own text format (no gpufleet agent):
#      the same choice, and the node taken from a relabelled label (--node-label).
#
#   GF_BINARY=build/gpufleet tests/integration/cluster_test.sh
#
# The loads (4 GPUs each; idle = utilization < 30 % and memory < 50 % of capacity):
#   node-a  utilization 10 10 90 90, memory 1 %     → 2 idle, mean 50 %
#   node-b  utilization  5  5  5 95, memory 1 %     → 3 idle, mean 27.5 %
#   node-c  utilization  0  0  0  0, memory 60 %    → 0 idle (memory), mean 0 %
# So 2 GPUs → node-b (most idle GPUs); 4 GPUs → no node (exit 75), and with --fallback least-loaded → node-c.
# Every wait is bounded; every process is stopped by pid on every exit path.
set -euo pipefail

GF_BINARY=${GF_BINARY:?set GF_BINARY to the gpufleet binary}
PROMETHEUS=${GF_PROMETHEUS:-prometheus}
command -v "$PROMETHEUS" >/dev/null || { echo "FAIL: '$PROMETHEUS' not found (scripts/install-deps.sh installs Debian's prometheus)" >&2; exit 1; }
command -v curl >/dev/null || { echo "FAIL: curl not found" >&2; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: python3 not found" >&2; exit 1; }

T=$(mktemp -d /tmp/gf-cluster-test.XXXXXX)
pids=()
failed=""
cleanup() {
  local p
  if [[ -n $failed ]]; then
    for f in "$T"/*.log; do echo "---- $(basename "$f") (last 10 lines)" >&2; tail -10 "$f" >&2 || true; done
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
# Fetches a document to a file first, then greps it: `curl | grep -q` fails under pipefail when grep
# stops reading before curl has written everything.
fetch_has() { curl -sf "$1" -o "$T/fetched" && grep -q "$2" "$T/fetched"; }
pass() { echo "ok: $*"; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---- three agents
scenario() {  # scenario FILE "u1 u2 u3 u4" MEMORY_MIB
  local u first=1
  { echo '{"gpus": ['
    for u in $2; do
      [[ $first -eq 1 ]] || echo ','
      first=0
      echo "{\"load\": [{\"t\": 0, \"utilization\": $u, \"memory_used_mib\": $3}]}"
    done
    echo ']}'; } >"$1"
}
scenario "$T/a.json" "10 10 90 90" 800
scenario "$T/b.json" "5 5 5 95" 800
scenario "$T/c.json" "0 0 0 0" 48936   # 60 % of the sim's 81559 MiB
declare -A AGENT
for n in a b c; do
  "$GF_BINARY" --backend sim --sim-scenario "$T/$n.json" serve --listen 127.0.0.1:0 --port-file "$T/$n.port" \
    --db "$T/$n.db" --no-history --node-name "node-$n" --interval 1 >"$T/agent-$n.log" 2>&1 &
  pids+=("$!")
done
for n in a b c; do
  for _ in $(seq 1 200); do [[ -s $T/$n.port ]] && break; sleep 0.05; done
  [[ -s $T/$n.port ]] || fail "agent node-$n wrote no port file within 10 s"
  AGENT[$n]=http://127.0.0.1:$(tr -d '[:space:]' <"$T/$n.port")
  for _ in $(seq 1 100); do curl -sf -o /dev/null "${AGENT[$n]}/metrics" && break; sleep 0.1; done
  curl -sf -o /dev/null "${AGENT[$n]}/metrics" || fail "agent node-$n does not answer /metrics"
done
pass "three agents: ${AGENT[a]} ${AGENT[b]} ${AGENT[c]}"

# start_prometheus CONFIG: sets P to its base URL once ready.
P=
start_prometheus() {
  local attempt pp pid
  for attempt in 1 2 3; do
    pp=$(free_port)
    "$PROMETHEUS" --config.file="$1" --storage.tsdb.path="$T/tsdb-$pp" --web.listen-address=127.0.0.1:$pp \
      >"$T/prometheus-$pp.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 200); do
      if curl -sf -o /dev/null "http://127.0.0.1:$pp/-/ready"; then P=http://127.0.0.1:$pp; return; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
  done
  fail "prometheus did not become ready (3 attempts)"
}
# wait_series EXPR N: waits up to 30 s until EXPR counts N series in Prometheus.
wait_series() {
  local got=""
  for _ in $(seq 1 150); do
    got=$(curl -sfG --data-urlencode "query=count($1)" "$P/api/v1/query" | sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' || true)
    [[ $got == "$2" ]] && return
    sleep 0.2
  done
  fail "count($1) is '${got:-no sample}' in Prometheus after 30 s, expected $2"
}

# check_select LABEL EXPECTED_NODE ARGS…: `cluster select --gpus 2` picks EXPECTED_NODE with the seed's lines.
check_select() {
  local label=$1 node=$2 out rc
  shift 2
  set +e
  out=$("$GF_BINARY" cluster select --gpus 2 "$@" 2>"$T/select.err")
  rc=$?
  set -e
  [[ $rc -eq 0 ]] || fail "$label: cluster select exited $rc: $(cat "$T/select.err") $out"
  grep -qxF "Selected node '$node' for deployment:" <<<"$out" || fail "$label: expected node $node, got: $out"
  grep -qxF "  - Allocatable GPUs: 4/4" <<<"$out" || fail "$label: no allocatable line: $out"
  grep -qxF "  - Idle GPUs: 3" <<<"$out" || fail "$label: expected 3 idle GPUs: $out"
  grep -qxF "  - Avg Utilization: 27.5%" <<<"$out" || fail "$label: expected 27.5% mean utilization: $out"
  grep -qF "Selected node: $node" <<<"$out" || fail "$label: no final line: $out"
  pass "$label: cluster select --gpus 2 → $node with the seed's reasoning"
}
# check_no_node LABEL FALLBACK_NODE ARGS…: 4 GPUs → exit 75 with the reason; least-loaded → FALLBACK_NODE.
check_no_node() {
  local label=$1 node=$2 out rc
  shift 2
  set +e
  out=$("$GF_BINARY" cluster select --gpus 4 --json "$@" 2>"$T/select.err")
  rc=$?
  set -e
  [[ $rc -eq 75 ]] || fail "$label: 4 GPUs: expected exit 75, got $rc: $out"
  grep -q '"node": null' <<<"$out" || fail "$label: 4 GPUs: expected \"node\": null: $out"
  grep -q 'no node has 4 idle GPU(s)' "$T/select.err" || fail "$label: 4 GPUs: no reason on stderr: $(cat "$T/select.err")"
  out=$("$GF_BINARY" cluster select --gpus 4 --fallback least-loaded --json "$@" 2>"$T/select.err") ||
    fail "$label: least-loaded exited $?: $(cat "$T/select.err")"
  grep -q "\"node\": \"$node\"" <<<"$out" || fail "$label: least-loaded: expected $node: $out"
  grep -q '"fallback_used": true' <<<"$out" || fail "$label: least-loaded: fallback_used not true: $out"
  pass "$label: 4 GPUs → no node (exit 75, reason on stderr); --fallback least-loaded → $node"
}

# ---- 1. Prometheus scraping the agents
cat >"$T/prom-agents.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: gpufleet
    static_configs:
      - targets: ['${AGENT[a]#http://}', '${AGENT[b]#http://}', '${AGENT[c]#http://}']
EOF
start_prometheus "$T/prom-agents.yml"
pass "prometheus $("$PROMETHEUS" --version 2>&1 | awk 'NR == 1 { print $3 }') ready at $P"
wait_series DCGM_FI_DEV_FB_FREE 12
wait_series 'timestamp(DCGM_FI_DEV_GPU_UTIL)' 12
check_select "prometheus over agents" node-b --prometheus "$P"
check_no_node "prometheus over agents" node-c --prometheus "$P"
out=$("$GF_BINARY" cluster nodes --json --prometheus "$P") || fail "cluster nodes through Prometheus failed"
python3 - "$out" <<'EOF' || fail "cluster nodes --json through Prometheus: unexpected document"
import json, sys
d = json.loads(sys.argv[1])
n = {x["name"]: x for x in d["nodes"]}
assert sorted(n) == ["node-a", "node-b", "node-c"], n.keys()
assert [n[k]["idle_gpu_count"] for k in ("node-a", "node-b", "node-c")] == [2, 3, 0], d
assert n["node-c"]["avg_memory_usage"] == 60.0 and n["node-c"]["avg_utilization"] == 0, n["node-c"]
assert all(x["health"] == "ok" and x["gpus_with_metrics"] == 4 and x["metrics_source"] == "prometheus" for x in n.values()), d
EOF
pass "cluster nodes --json through Prometheus: idle 2/3/0, node-c at 60 % memory"

# ---- the same through the agents directly
check_select "agents (--agent)" node-b --agent "${AGENT[a]}" --agent "${AGENT[b]}" --agent "${AGENT[c]}"
printf '# the fleet\n%s\n\n%s  # rack 2\n%s\nhttp://127.0.0.1:1\n' "${AGENT[a]}" "${AGENT[b]}" "${AGENT[c]}" >"$T/agents.txt"
check_select "agents (--agents FILE, one unreachable)" node-b --agents "$T/agents.txt"
grep -q 'agent http://127.0.0.1:1' "$T/select.err" || fail "the unreachable agent is not reported: $(cat "$T/select.err")"
pass "the unreachable agent is reported on stderr, not fatal"
check_no_node "agents" node-c --agents "$T/agents.txt"

# ---- the REST routes: a fourth agent with --cluster-config (Prometheus and the agents file) refreshes in the background
cat >"$T/cluster.json" <<EOF
{"prometheus": "$P", "agents_file": "agents.txt", "refresh_interval_s": 1, "timeout_s": 2, "fallback": "none"}
EOF
"$GF_BINARY" --backend sim serve --listen 127.0.0.1:0 --port-file "$T/rest.port" --db "$T/rest.db" --no-history \
  --node-name rest --cluster-config "$T/cluster.json" >"$T/agent-rest.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 200); do [[ -s $T/rest.port ]] && break; sleep 0.05; done
[[ -s $T/rest.port ]] || fail "the agent with --cluster-config wrote no port file within 10 s"
R=http://127.0.0.1:$(tr -d '[:space:]' <"$T/rest.port")
code=
for _ in $(seq 1 100); do
  code=$(curl -s -o "$T/select.json" -w '%{http_code}' "$R/api/v1/cluster/select?gpus=2" || true)
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || fail "GET /api/v1/cluster/select answered $code after 10 s: $(cat "$T/select.json")"
grep -q '"node":"node-b"' "$T/select.json" || fail "GET /api/v1/cluster/select?gpus=2: expected node-b: $(cat "$T/select.json")"
fetch_has "$R/api/v1/cluster/select?gpus=4&fallback=least-loaded" '"node":"node-c"' ||
  fail "GET /api/v1/cluster/select?gpus=4&fallback=least-loaded: expected node-c"
fetch_has "$R/api/v1/cluster/select?gpus=2&utilization_threshold=6" '"node":"node-b"' ||
  fail "utilization_threshold=6: expected node-b (3 GPUs at 5 %)"
code=$(curl -s -o /dev/null -w '%{http_code}' "$R/api/v1/cluster/select?gpus=zero")
[[ $code == 400 ]] || fail "gpus=zero: expected 400, got $code"
fetch_has "$R/api/v1/cluster/nodes" '"name":"node-c"' || fail "GET /api/v1/cluster/nodes has no node-c"
curl -sf "$R/api/openapi.json" -o "$T/openapi.json" && grep -q '/api/v1/cluster/select' "$T/openapi.json" || fail "the OpenAPI document has no /api/v1/cluster/select"
pass "serve --cluster-config: /api/v1/cluster/select, nodes, 400 for bad input, in the OpenAPI document"

# ---- 2. Prometheus scraping dcgm-exporter's own format (no gpufleet agent)
mkdir -p "$T/www"
dcgm_page() {  # dcgm_page FILE HOST "u1 u2 u3 u4" USED_MIB
  local f=$1 host=$2 used=$4 i=0 u metric
  local total=81559
  : >"$f"
  for metric in DCGM_FI_DEV_GPU_UTIL DCGM_FI_DEV_FB_USED DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_GPU_TEMP DCGM_FI_DEV_POWER_USAGE; do
    echo "# HELP $metric $metric from dcgm-exporter." >>"$f"
    echo "# TYPE $metric gauge" >>"$f"
    i=0
    for u in $3; do
      case $metric in
        DCGM_FI_DEV_GPU_UTIL) v=$u ;;
        DCGM_FI_DEV_FB_USED) v=$used ;;
        DCGM_FI_DEV_FB_FREE) v=$((total - used)) ;;
        DCGM_FI_DEV_GPU_TEMP) v=40 ;;
        *) v=123.456 ;;
      esac
      echo "$metric{gpu=\"$i\",UUID=\"GPU-$host-000$i\",pci_bus_id=\"00000000:0$i:00.0\",device=\"nvidia$i\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"$host\",DCGM_FI_DRIVER_VERSION=\"535.129.03\"} $v" >>"$f"
      i=$((i + 1))
    done
  done
}
dcgm_page "$T/www/a.txt" dcgm-a "10 10 90 90" 800
dcgm_page "$T/www/b.txt" dcgm-b "5 5 5 95" 800
dcgm_page "$T/www/c.txt" dcgm-c "0 0 0 0" 48936
WP=
for attempt in 1 2 3; do
  WP=$(free_port)
  python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$WP" >"$T/http.log" 2>&1 &
  pids+=("$!")
  ok=0
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$WP/a.txt" && { ok=1; break; }; sleep 0.1; done
  [[ $ok -eq 1 ]] && break
  [[ $attempt -eq 3 ]] && fail "python3 -m http.server did not serve the pages"
done
{
  echo "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}"
  echo "scrape_configs:"
  for n in a b c; do
    echo "  - job_name: dcgm-$n"
    echo "    metrics_path: /$n.txt"
    echo "    static_configs:"
    echo "      - targets: ['127.0.0.1:$WP']"
    echo "        labels: {kubernetes_node: 'k8s-$n'}"
  done
} >"$T/prom-dcgm.yml"
start_prometheus "$T/prom-dcgm.yml"
pass "second prometheus ready at $P, scraping dcgm-exporter pages from 127.0.0.1:$WP"
wait_series DCGM_FI_DEV_FB_FREE 12
wait_series 'timestamp(DCGM_FI_DEV_GPU_UTIL)' 12
check_select "prometheus over dcgm-exporter pages" dcgm-b --prometheus "$P"
check_no_node "prometheus over dcgm-exporter pages" dcgm-c --prometheus "$P"
check_select "dcgm-exporter pages, --node-label kubernetes_node" k8s-b --prometheus "$P" --node-label kubernetes_node
out=$("$GF_BINARY" cluster gpus --json --prometheus "$P") || fail "cluster gpus through Prometheus failed"
python3 - "$out" <<'EOF' || fail "cluster gpus --json over dcgm-exporter pages: unexpected document"
import json, sys
d = json.loads(sys.argv[1])
g = [x for x in d["gpus"] if x["node"] == "dcgm-c"]
assert len(d["gpus"]) == 12 and len(g) == 4, d
assert all(x["memory_total_mib"] == 81559 and x["memory_used_mib"] == 48936 and x["idle"] is False for x in g), g
assert all(x["power_w"] == 123.456 and x["temperature"] == 40 and x["model"] == "NVIDIA H100 80GB HBM3" for x in g), g
EOF
pass "cluster gpus --json: total = used + free, temperature and power from dcgm-exporter's names"

# ---- GPU health through Prometheus (issue 21): the pages gain dcgm-exporter's last XID and row-remap failure,
# and gpufleet's own verdict. dcgm-b: XID 79 on GPU 0, XID 13 (an application fault) on GPU 1, a failed row
# remap on GPU 2 → 1 idle GPU left (GPU 1) and 2 free; dcgm-c: gpufleet_gpu_health says GPU 2 is unhealthy
# and GPU 3 lost. So 2 GPUs → dcgm-a now; 3 GPUs → no node, and the refusals name the unhealthy GPUs.
labels_of() { echo "gpu=\"$2\",UUID=\"GPU-$1-000$2\",pci_bus_id=\"00000000:0$2:00.0\",device=\"nvidia$2\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"$1\",DCGM_FI_DRIVER_VERSION=\"535.129.03\""; }
health_series() {  # health_series HOST "xid0 xid1 xid2 xid3" "remap0 …" ["state0 …"]
  local host=$1 i v
  echo "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"
  i=0; for v in $2; do echo "DCGM_FI_DEV_XID_ERRORS{$(labels_of "$host" $i)} $v"; i=$((i + 1)); done
  echo "# TYPE DCGM_FI_DEV_ROW_REMAP_FAILURE gauge"
  i=0; for v in $3; do echo "DCGM_FI_DEV_ROW_REMAP_FAILURE{$(labels_of "$host" $i)} $v"; i=$((i + 1)); done
  if [[ -n ${4:-} ]]; then
    echo "# TYPE gpufleet_gpu_health gauge"
    i=0; for v in $4; do echo "gpufleet_gpu_health{$(labels_of "$host" $i),state=\"$v\"} 1"; i=$((i + 1)); done
  fi
}
dcgm_page "$T/b.new" dcgm-b "5 5 5 95" 800
health_series dcgm-b "79 13 0 0" "0 0 1 0" >>"$T/b.new"
dcgm_page "$T/c.new" dcgm-c "0 0 0 0" 48936
health_series dcgm-c "0 0 0 0" "0 0 0 0" "ok ok unhealthy lost" >>"$T/c.new"
mv "$T/b.new" "$T/www/b.txt"
mv "$T/c.new" "$T/www/c.txt"
wait_series 'DCGM_FI_DEV_XID_ERRORS != 0' 2
wait_series 'DCGM_FI_DEV_ROW_REMAP_FAILURE != 0' 1
wait_series 'gpufleet_gpu_health{state!="ok"}' 2
out=$("$GF_BINARY" cluster select --gpus 2 --prometheus "$P" 2>"$T/select.err") ||
  fail "health: cluster select --gpus 2 exited $?: $(cat "$T/select.err")"
grep -qxF "Selected node 'dcgm-a' for deployment:" <<<"$out" ||
  fail "health: 2 GPUs: expected dcgm-a (dcgm-b lost two idle GPUs): $out"
set +e
out=$("$GF_BINARY" cluster select --gpus 3 --prometheus "$P" 2>"$T/select.err")
rc=$?
set -e
[[ $rc -eq 75 ]] || fail "health: 3 GPUs: expected exit 75, got $rc: $out"
grep -qF "GPUs lost to health: 'dcgm-b': 2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus); row remap failure; 'dcgm-c': 2 GPU(s) unhealthy: unhealthy (gpufleet); GPU lost" "$T/select.err" ||
  fail "health: 3 GPUs: the reason does not name the unhealthy GPUs: $(cat "$T/select.err")"
pass "health: cluster select --gpus 2 → dcgm-a; --gpus 3 → none, and the reason names each node's unhealthy GPUs"
out=$("$GF_BINARY" cluster select --gpus 3 --json --prometheus "$P" 2>/dev/null) || true
out_nodes=$("$GF_BINARY" cluster nodes --json --prometheus "$P") || fail "health: cluster nodes --json failed"
out_gpus=$("$GF_BINARY" cluster gpus --json --prometheus "$P") || fail "health: cluster gpus --json failed"
python3 - "$out" "$out_nodes" "$out_gpus" <<'EOF' || fail "health: unexpected documents"
import json, sys
sel, nodes, gpus = (json.loads(a) for a in sys.argv[1:4])
c = {x["node"]: x for x in sel["candidates"]}
assert c["dcgm-b"]["why_not"] == "2 free GPU(s) < 3 (2 GPU(s) unhealthy: XID 79 (GPU has fallen off the bus); row remap failure)", c["dcgm-b"]
assert c["dcgm-b"]["unhealthy_gpus"] == 2 and c["dcgm-a"]["unhealthy_gpus"] == 0, c
n = {x["name"]: x for x in nodes["nodes"]}
assert [n[k]["unhealthy_gpus"] for k in ("dcgm-a", "dcgm-b", "dcgm-c")] == [0, 2, 2], n
assert [n[k]["idle_gpu_count"] for k in ("dcgm-a", "dcgm-b", "dcgm-c")] == [2, 1, 0], n
assert [n[k]["free_gpus"] for k in ("dcgm-a", "dcgm-b", "dcgm-c")] == [4, 2, 2], n
assert n["dcgm-a"]["unhealthy"] is None and n["dcgm-c"]["unhealthy"] == "unhealthy (gpufleet); GPU lost", n["dcgm-c"]
assert "GPU 0 is unhealthy: XID 79 (GPU has fallen off the bus)" in n["dcgm-b"]["problems"], n["dcgm-b"]
g = {(x["node"], x["index"]): x for x in gpus["gpus"]}
assert g[("dcgm-b", 0)]["healthy"] is False and g[("dcgm-b", 0)]["unhealthy"] == "XID 79 (GPU has fallen off the bus)", g[("dcgm-b", 0)]
assert g[("dcgm-b", 1)]["healthy"] is True and g[("dcgm-b", 1)]["idle"] is True, g[("dcgm-b", 1)]  # XID 13: healthy
assert g[("dcgm-b", 2)]["unhealthy"] == "row remap failure" and g[("dcgm-b", 2)]["idle"] is False, g[("dcgm-b", 2)]
assert g[("dcgm-c", 3)]["unhealthy"] == "GPU lost" and g[("dcgm-c", 1)]["healthy"] is True, gpus
assert all(x["healthy"] for x in gpus["gpus"] if x["node"] == "dcgm-a"), gpus
EOF
pass "health: cluster nodes/gpus/select --json: unhealthy_gpus, free and idle without them, each GPU's reason"

# The agent's fleet view over the same Prometheus: /api/v1/cluster/* show the same health.
echo "{\"prometheus\": \"$P\", \"refresh_interval_s\": 1, \"timeout_s\": 2}" >"$T/cluster-dcgm.json"
"$GF_BINARY" --backend sim serve --listen 127.0.0.1:0 --port-file "$T/rest2.port" --db "$T/rest2.db" --no-history \
  --node-name rest2 --cluster-config "$T/cluster-dcgm.json" >"$T/agent-rest2.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 200); do [[ -s $T/rest2.port ]] && break; sleep 0.05; done
[[ -s $T/rest2.port ]] || fail "the second agent with --cluster-config wrote no port file within 10 s"
R2=http://127.0.0.1:$(tr -d '[:space:]' <"$T/rest2.port")
code=
for _ in $(seq 1 100); do
  code=$(curl -s -o "$T/nodes2.json" -w '%{http_code}' "$R2/api/v1/cluster/nodes" || true)
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || fail "GET /api/v1/cluster/nodes (dcgm Prometheus) answered $code after 10 s"
grep -qF '"unhealthy":"XID 79 (GPU has fallen off the bus); row remap failure","unhealthy_gpus":2' "$T/nodes2.json" ||
  fail "GET /api/v1/cluster/nodes: dcgm-b's unhealthy GPUs are missing: $(cat "$T/nodes2.json")"
fetch_has "$R2/api/v1/cluster/gpus" '"healthy":false' || fail "GET /api/v1/cluster/gpus: no GPU is unhealthy"
fetch_has "$R2/api/v1/cluster/select?gpus=3" '2 GPU(s) unhealthy: XID 79' ||
  fail "GET /api/v1/cluster/select?gpus=3: the unhealthy GPUs are not named"
pass "serve --cluster-config over Prometheus: /api/v1/cluster/nodes, gpus and select show the health"

# An old series counts as no metrics: with --max-age 0.001 every node falls back to "free GPUs are idle".
out=$("$GF_BINARY" cluster nodes --json --prometheus "$P" --max-age 0.001) || fail "cluster nodes --max-age failed"
grep -q '"health": "metrics_stale"' <<<"$out" || fail "--max-age 0.001: no node is metrics_stale: $out"
pass "--max-age: older series count as no metrics"

# Sample times are asked per node (count_values); a node whose GPUs differ is asked again per GPU. dcgm-a
# gains a fifth GPU whose utilization carries its own time, 90 s old: only that GPU is stale at --max-age 60.
dcgm_page "$T/a.new" dcgm-a "10 10 90 90" 800
echo "DCGM_FI_DEV_GPU_UTIL{$(labels_of dcgm-a 4)} 0 $(($(date +%s) * 1000 - 90000))" >>"$T/a.new"
mv "$T/a.new" "$T/www/a.txt"
wait_series 'DCGM_FI_DEV_GPU_UTIL{gpu="4"}' 1
gpus_of_a() {  # gpus_of_a MAX_AGE: dcgm-a's GPU indices in `cluster gpus --json`
  "$GF_BINARY" cluster gpus --json --prometheus "$P" --max-age "$1" |
    python3 -c 'import json, sys; print(" ".join(str(g["index"]) for g in json.load(sys.stdin)["gpus"] if g["node"] == "dcgm-a"))'
}
[[ $(gpus_of_a 600) == "0 1 2 3 4" ]] || fail "sample times: --max-age 600: dcgm-a's GPUs are '$(gpus_of_a 600)', expected 0-4"
[[ $(gpus_of_a 60) == "0 1 2 3" ]] || fail "sample times: --max-age 60: dcgm-a's GPUs are '$(gpus_of_a 60)', expected 0-3 (GPU 4 is 90 s old)"
out=$("$GF_BINARY" cluster nodes --json --prometheus "$P" --max-age 60) || fail "sample times: cluster nodes failed"
python3 - "$out" <<'EOF' || fail "sample times: a node with one stale GPU is not fresh: $out"
import json, sys
n = {x["name"]: x for x in json.loads(sys.argv[1])["nodes"]}
assert all(n[k]["health"] == "ok" for k in ("dcgm-a", "dcgm-b", "dcgm-c")), n
EOF
pass "sample times: per node, and per GPU where a node's GPUs differ (a 90 s old GPU is stale beside fresh ones)"

echo "cluster_test: all checks passed"
