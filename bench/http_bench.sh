#!/usr/bin/env bash
# The agent's HTTP and WebSocket figures, in one run on one machine (called by bench/run.sh; runs alone too).
#
#   bench/http_bench.sh
#
# Environment: GF_BENCH_BUILD (build dir, default build-bench), GF_BINARY (an already built gpufleet instead of
# building $GF_BENCH_BUILD/gpufleet), GF_WRK_SECONDS (5), GF_WRK_ROUNDS (3), GF_WS_CLIENTS (1000),
# GF_WS_SECONDS (10).
#
# 1. `gpufleet --backend sim --sim-gpus 8 serve` is started; GET /api/v1/monitoring/gpu-metrics and GET /metrics
#    are fetched once into files.
# 2. The same bytes are served from memory by bench/bare_http_server.cpp (the ceiling for a Beast server with
#    one io thread on this machine), and Debian's prometheus-node-exporter serves its own /metrics (what people
#    run today).
#    Both also serve the gzip-encoded answers (`Accept-Encoding: gzip`, as Prometheus asks): the bare server
#    the agent's own compressed bytes, fetched with the same header.
# 3. `wrk -t2 -c50 -d5s --latency` against each, 3 interleaved rounds: median requests/s, p50 and p99, and the
#    ratios agent/bare (plain and gzip) and agent/node-exporter.
# 4. The agent's VmRSS and VmHWM after that load.
# 5. WebSocket fan-out: 1 000 clients of /ws?period_ms=1000 for 10 s (bench/ws_fanout.cpp), with the agent's
#    CPU and RSS over the window.
# Everything is started on loopback ports and stopped by pid. Ends with a markdown block for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

B=${GF_BENCH_BUILD:-build-bench}
WRK_SECONDS=${GF_WRK_SECONDS:-5}
WS_CLIENTS=${GF_WS_CLIENTS:-1000}
WS_SECONDS=${GF_WS_SECONDS:-10}
ROUNDS=${GF_WRK_ROUNDS:-3}
GPUS=8

command -v wrk >/dev/null && command -v prometheus-node-exporter >/dev/null || scripts/install-deps.sh
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
AGENT_BIN=${GF_BINARY:-$B/gpufleet}
cmake --build "$B" --target gf_bare_http_server gf_ws_fanout $([[ -n ${GF_BINARY:-} ]] || echo gpufleet) >/dev/null

T=$(mktemp -d /tmp/gf-http-bench.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "http_bench: $*" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null && return
  local p
  while :; do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
  done
}

wait_port_file() {  # FILE PID WHAT
  local i
  for i in $(seq 1 200); do
    [[ -s $1 ]] && return
    kill -0 "$2" 2>/dev/null || die "$3 exited before listening"
    sleep 0.05
  done
  die "$3 did not write $1 within 10 s"
}

wait_http() {  # URL WHAT
  local i
  for i in $(seq 1 200); do
    curl -sf -o /dev/null "$1" && return
    sleep 0.05
  done
  die "$2 did not answer $1 within 10 s"
}

proc_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }  # PID VmRSS|VmHWM

# ---- 1. the agent
"$AGENT_BIN" --backend sim --sim-gpus $GPUS serve --listen 127.0.0.1:0 --port-file "$T/agent.port" \
  --db "$T/agent.db" --interval 1 2>"$T/agent.log" &
AGENT=$!
pids+=("$AGENT")
wait_port_file "$T/agent.port" "$AGENT" "gpufleet serve"
AP=$(cat "$T/agent.port")
A=http://127.0.0.1:$AP
wait_http "$A/api/health" "gpufleet serve"
sleep 1.5  # a first sample is taken
json_type=$(curl -sf -o "$T/gpu-metrics.json" -w '%{content_type}' "$A/api/v1/monitoring/gpu-metrics") || die "GET /api/v1/monitoring/gpu-metrics failed"
prom_type=$(curl -sf -o "$T/metrics.txt" -w '%{content_type}' "$A/metrics") || die "GET /metrics failed"
# The compressed answers as they come (no --compressed: the raw bytes), and a check that they are gzip.
curl -sf -H 'Accept-Encoding: gzip' -o "$T/gpu-metrics.json.gz" "$A/api/v1/monitoring/gpu-metrics" || die "GET gpu-metrics (gzip) failed"
curl -sf -H 'Accept-Encoding: gzip' -o "$T/metrics.txt.gz" "$A/metrics" || die "GET /metrics (gzip) failed"
cmp -s <(gzip -dc "$T/gpu-metrics.json.gz") "$T/gpu-metrics.json" || die "gpu-metrics with gzip is not the plain document gzip-encoded"
gzip -t "$T/metrics.txt.gz" || die "/metrics with gzip is not gzip"
gpus_in_json=$(grep -o '"uuid"' "$T/gpu-metrics.json" | wc -l)
gpus_in_prom=$(grep -c '^DCGM_FI_DEV_GPU_UTIL{' "$T/metrics.txt" || true)
[[ $gpus_in_prom -eq $GPUS ]] || die "/metrics has $gpus_in_prom DCGM_FI_DEV_GPU_UTIL series, expected $GPUS"
rss_start=$(proc_kib "$AGENT" VmRSS)

# ---- 2. the ceiling and the incumbent
"$B/bench/gf_bare_http_server" --listen 127.0.0.1:0 --port-file "$T/bare.port" \
  --serve "/api/v1/monitoring/gpu-metrics=$T/gpu-metrics.json:${json_type:-application/json}" \
  --serve "/metrics=$T/metrics.txt:${prom_type:-text/plain}" \
  --serve-gzip "/api/v1/monitoring/gpu-metrics=$T/gpu-metrics.json.gz" --serve-gzip "/metrics=$T/metrics.txt.gz" \
  2>"$T/bare.log" &
BARE_PID=$!
pids+=("$BARE_PID")
wait_port_file "$T/bare.port" "$BARE_PID" "gf_bare_http_server"
BARE=http://127.0.0.1:$(cat "$T/bare.port")

NEP=$(free_port)
prometheus-node-exporter --web.listen-address=127.0.0.1:$NEP --web.max-requests=0 >"$T/node-exporter.log" 2>&1 &
NE_PID=$!
pids+=("$NE_PID")
NE=http://127.0.0.1:$NEP
wait_http "$NE/metrics" "prometheus-node-exporter"
ne_bytes=$(curl -sf "$NE/metrics" | wc -c)

# ---- 3. wrk: $ROUNDS rounds over the nine targets, interleaved so that a change in the machine's background
# load hits every target alike; each figure is the median over the rounds.
declare -A RPS P99 P50 NON2XX SOCKERR CPUREQ
declare -A SPID=([agent_json]=$AGENT [agent_prom]=$AGENT [bare_json]=$BARE_PID [bare_prom]=$BARE_PID [ne_prom]=$NE_PID
  [agent_json_gz]=$AGENT [agent_prom_gz]=$AGENT [bare_json_gz]=$BARE_PID [bare_prom_gz]=$BARE_PID)
targets=(agent_json agent_prom bare_json bare_prom ne_prom agent_json_gz agent_prom_gz bare_json_gz bare_prom_gz)
declare -A URL=([agent_json]=$A/api/v1/monitoring/gpu-metrics [agent_prom]=$A/metrics
  [bare_json]=$BARE/api/v1/monitoring/gpu-metrics [bare_prom]=$BARE/metrics [ne_prom]=$NE/metrics
  [agent_json_gz]=$A/api/v1/monitoring/gpu-metrics [agent_prom_gz]=$A/metrics
  [bare_json_gz]=$BARE/api/v1/monitoring/gpu-metrics [bare_prom_gz]=$BARE/metrics)
to_ms() {  # wrk's "1.61ms" / "749.16us" / "1.45s" -> milliseconds
  awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u);
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000; printf "%.2f", n }'
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }  # utime + stime of PID
run_wrk() {  # NAME ROUND
  local out=$T/wrk-$1-$2.txt c0 c1 n
  c0=$(cpu_ticks "${SPID[$1]}")
  local hdr=()
  [[ $1 == *_gz ]] && hdr=(-H 'Accept-Encoding: gzip')
  wrk -t2 -c50 -d${WRK_SECONDS}s --latency "${hdr[@]}" "${URL[$1]}" >"$out" 2>&1 || die "wrk ${URL[$1]} failed: $(cat "$out")"
  c1=$(cpu_ticks "${SPID[$1]}")
  n=$(awk '/requests in/ { print $1 }' "$out")
  CPUREQ[$1]+=" $(awk -v d=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="$n" 'BEGIN { printf "%.1f", (n > 0 ? d / hz / n * 1e6 : 0) }')"
  RPS[$1]+=" $(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")"
  P50[$1]+=" $(to_ms "$(awk '$1 == "50%" { print $2 }' "$out")")"
  P99[$1]+=" $(to_ms "$(awk '$1 == "99%" { print $2 }' "$out")")"
  NON2XX[$1]=$(( ${NON2XX[$1]:-0} + $(awk -F': ' '/Non-2xx or 3xx responses/ { n = $2 } END { print n + 0 }' "$out") ))
  local se
  se=$(sed -n 's/^ *Socket errors: //p' "$out")
  [[ -n $se ]] && SOCKERR[$1]+="${SOCKERR[$1]:+; }$se"
  return 0
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== wrk -t2 -c50 -d${WRK_SECONDS}s --latency, one target at a time, $ROUNDS rounds (load average before: $load_before)"
for round in $(seq 1 "$ROUNDS"); do
  for t in "${targets[@]}"; do run_wrk "$t" "$round"; done
  kill -0 "$AGENT" 2>/dev/null || die "the agent died under load; its log: $(tail -20 "$T/agent.log")"
  echo "round $round: $(for t in "${targets[@]}"; do printf '%s %s req/s; ' "$t" "${RPS[$t]##* }"; done)"
done
rss_after_load=$(proc_kib "$AGENT" VmRSS)
hwm_after_load=$(proc_kib "$AGENT" VmHWM)
declare -A ALL_RPS
for t in "${targets[@]}"; do
  ALL_RPS[$t]=${RPS[$t]# }
  RPS[$t]=$(printf "%.0f" "$(median <<<"${RPS[$t]}")")
  P50[$t]=$(median <<<"${P50[$t]}")
  P99[$t]=$(median <<<"${P99[$t]}")
  CPUREQ[$t]=$(median <<<"${CPUREQ[$t]}")
done
health_after=$(curl -s -o /dev/null -w '%{http_code}' "$A/api/health" || true)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
verdict() { awk -v r="$1" -v g="$2" 'BEGIN { print (r >= g ? "met" : "MISSED") }'; }
r_json_bare=$(ratio "${RPS[agent_json]}" "${RPS[bare_json]}")
r_prom_bare=$(ratio "${RPS[agent_prom]}" "${RPS[bare_prom]}")
r_json_gz_bare=$(ratio "${RPS[agent_json_gz]}" "${RPS[bare_json_gz]}")
r_prom_gz_bare=$(ratio "${RPS[agent_prom_gz]}" "${RPS[bare_prom_gz]}")
r_prom_ne=$(ratio "${RPS[agent_prom]}" "${RPS[ne_prom]}")
r_json_ne=$(ratio "${RPS[agent_json]}" "${RPS[ne_prom]}")
json_bytes=$(wc -c <"$T/gpu-metrics.json")
prom_bytes=$(wc -c <"$T/metrics.txt")
json_gz_bytes=$(wc -c <"$T/gpu-metrics.json.gz")
prom_gz_bytes=$(wc -c <"$T/metrics.txt.gz")

table=$(
  printf '| server | path | body | requests/s (median) | each round | p50 | p99 | server CPU per request | non-2xx | socket errors |\n'
  printf '|---|---|---|---|---|---|---|---|---|---|\n'
  row() { printf '| %s | `%s` | %s B | **%s** | %s | %s ms | %s ms | %s µs | %s | %s |\n' "$1" "$2" "$3" "${RPS[$4]}" "${ALL_RPS[$4]// /, }" \
    "${P50[$4]}" "${P99[$4]}" "${CPUREQ[$4]}" "${NON2XX[$4]}" "${SOCKERR[$4]:-none}"; }
  row "gpufleet serve" /api/v1/monitoring/gpu-metrics "$json_bytes" agent_json
  row "gpufleet serve" /metrics "$prom_bytes" agent_prom
  row "bare Beast, same bytes" /api/v1/monitoring/gpu-metrics "$json_bytes" bare_json
  row "bare Beast, same bytes" /metrics "$prom_bytes" bare_prom
  row "prometheus-node-exporter 1.5" /metrics "$ne_bytes" ne_prom
  row "gpufleet serve, gzip" /api/v1/monitoring/gpu-metrics "$json_gz_bytes" agent_json_gz
  row "gpufleet serve, gzip" /metrics "$prom_gz_bytes" agent_prom_gz
  row "bare Beast, same gzip bytes" /api/v1/monitoring/gpu-metrics "$json_gz_bytes" bare_json_gz
  row "bare Beast, same gzip bytes" /metrics "$prom_gz_bytes" bare_prom_gz
)
ratios=$(
  printf '| ratio | value | goal |\n|---|---|---|\n'
  printf '| agent / bare, gpu-metrics (req/s) | %s | ≥ 0.9: %s |\n' "$r_json_bare" "$(verdict "$r_json_bare" 0.9)"
  printf '| agent / bare, /metrics (req/s) | %s | ≥ 0.9: %s |\n' "$r_prom_bare" "$(verdict "$r_prom_bare" 0.9)"
  printf '| agent / bare, gpu-metrics gzip (req/s) | %s | ≥ 0.9: %s |\n' "$r_json_gz_bare" "$(verdict "$r_json_gz_bare" 0.9)"
  printf '| agent / bare, /metrics gzip (req/s) | %s | ≥ 0.9: %s |\n' "$r_prom_gz_bare" "$(verdict "$r_prom_gz_bare" 0.9)"
  # The same by the server's CPU per request (bare / agent): steadier than req/s on a shared machine.
  for t in json prom json_gz prom_gz; do
    printf '| agent / bare, %s, by CPU per request (bare µs / agent µs) | %s | ≥ 0.9: %s |\n' "$t" \
      "$(ratio "${CPUREQ[bare_$t]}" "${CPUREQ[agent_$t]}")" "$(verdict "$(ratio "${CPUREQ[bare_$t]}" "${CPUREQ[agent_$t]}")" 0.9)"
  done
  printf '| agent /metrics / node-exporter /metrics (req/s) | %s | ≥ 100: %s |\n' "$r_prom_ne" "$(verdict "$r_prom_ne" 100)"
  printf '| agent gpu-metrics / node-exporter /metrics (req/s) | %s | |\n' "$r_json_ne"
)
echo "$table"
echo
echo "$ratios"
echo
rss_line="agent RSS: at start ${rss_start} KiB (goal < 10 MiB: $(awk -v k="$rss_start" 'BEGIN { print (k < 10240 ? "met" : "MISSED") }')); after the wrk load VmRSS ${rss_after_load} KiB ($(awk -v k="$rss_after_load" 'BEGIN { printf "%.1f", k / 1024 }') MiB), VmHWM ${hwm_after_load} KiB ($(awk -v k="$hwm_after_load" 'BEGIN { printf "%.1f", k / 1024 }') MiB); goal ≤ 16 MiB: $(awk -v k="$hwm_after_load" 'BEGIN { print (k <= 16384 ? "met" : "MISSED") }'); /api/health after the load: $health_after"
echo "$rss_line"

# ---- 5. WebSocket fan-out
echo
echo "== WebSocket fan-out: $WS_CLIENTS clients of /ws?period_ms=1000 for ${WS_SECONDS} s"
rm -f "$T/ws.ready"
"$B/bench/gf_ws_fanout" --url "ws://127.0.0.1:$AP/ws?period_ms=1000" --clients "$WS_CLIENTS" --duration "$WS_SECONDS" \
  --pid "$AGENT" --ready-file "$T/ws.ready" >"$T/ws.txt" 2>&1 &
WS=$!
pids+=("$WS")
for _ in $(seq 1 600); do [[ -e $T/ws.ready ]] || ! kill -0 $WS 2>/dev/null && break; sleep 0.05; done
# While the clients are connected: what the agent says about them, and how long one HTTP request takes.
sleep 1
ws_gauge=$(curl -s "$A/metrics" | awk '$1 ~ /^gpufleet_websocket_clients($|\{)/ { print $2 }')
http_during=$(curl -s -o /dev/null -w '%{http_code} in %{time_total} s' "$A/api/v1/monitoring/gpu-metrics" || true)
ws_rc=0
wait $WS || ws_rc=$?
cat "$T/ws.txt"
sleep 2
ws_gauge_after=$(curl -s "$A/metrics" | awk '$1 ~ /^gpufleet_websocket_clients($|\{)/ { print $2 }')
rss_after_ws=$(proc_kib "$AGENT" VmRSS)
hwm_after_ws=$(proc_kib "$AGENT" VmHWM)
echo "gpufleet_websocket_clients during the fan-out: ${ws_gauge:-absent}; 2 s after the clients closed: ${ws_gauge_after:-absent}"
echo "one GET /api/v1/monitoring/gpu-metrics during the fan-out: $http_during"
echo "agent after the fan-out: VmRSS $rss_after_ws KiB, VmHWM $hwm_after_ws KiB"
[[ $ws_rc -eq 0 ]] || echo "WARNING: gf_ws_fanout exit status $ws_rc (not every client connected and stayed connected)"
res=$(sed -n 's/^RESULT //p' "$T/ws.txt")
ws_events=$(sed -n 's/^messages in the window by event: //p' "$T/ws.txt")
ws_get() { tr ' ' '\n' <<<"$res" | awk -F= -v k="$1" '$1 == k { print $2 }'; }

# ---- the agent stops cleanly
kill -TERM "$AGENT"
stop_rc=0
for _ in $(seq 1 100); do kill -0 "$AGENT" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$AGENT" 2>/dev/null; then
  stop_rc="still running 5 s after SIGTERM"
else
  wait "$AGENT" || stop_rc=$?
fi
echo "agent exit after SIGTERM: $stop_rc"
if grep -qiE 'error|warn|fail' "$T/agent.log"; then
  echo "agent log, lines with error/warn/fail (first 10 of $(grep -ciE 'error|warn|fail' "$T/agent.log")):"
  grep -iE 'error|warn|fail' "$T/agent.log" | head -10
fi

# ---- markdown
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
cat <<EOF

---- markdown for bench/RESULTS.md ----
### HTTP and WebSocket: \`gpufleet serve\`, $GPUS simulated GPUs (\`bench/http_bench.sh\`)

$(date -u +%F), $(nproc) cores ($cpu_model), $(uname -r); wrk $(wrk -v 2>&1 | awk 'NR == 1 { print $2 }') with
\`wrk -t2 -c50 -d${WRK_SECONDS}s --latency URL\`, one target at a time, $ROUNDS rounds interleaved, medians; all on
loopback on this machine (wrk takes its share of the same $(nproc) cores; load average before: $load_before). The bare server (\`bench/bare_http_server.cpp\`, one io thread,
keep-alive) answers the agent's own bytes, fetched just before, from memory. "Server CPU per request" is the server
process's utime+stime over a wrk run divided by the requests served (less sensitive to other load than req/s). node-exporter runs with
\`--web.max-requests=0\` and serves its own /metrics.

$table

$ratios

Agent RSS: ${rss_start} KiB at start (goal < 10 MiB = 10240 KiB); after the wrk load VmRSS ${rss_after_load} KiB, VmHWM ${hwm_after_load} KiB
(goal ≤ 16 MiB = 16384 KiB). /api/health after the load: $health_after.

WebSocket fan-out (\`gf_ws_fanout --clients $WS_CLIENTS --duration $WS_SECONDS\`, /ws?period_ms=1000):

| clients connected | dropped | connect time | messages/s | per-client rate min / mean | gap p50 / p99 / max | agent CPU | agent VmRSS max / VmHWM | client's own CPU |
|---|---|---|---|---|---|---|---|---|
| $(ws_get connected) / $(ws_get clients) | $(ws_get dropped) | $(ws_get connect_s) s | $(ws_get msgs_per_s) | $(ws_get rate_min) / $(ws_get rate_mean) /s | $(ws_get gap_p50_ms) / $(ws_get gap_p99_ms) / $(ws_get gap_max_ms) ms | $(ws_get cpu_pct) % of one core | $(ws_get rss_max_kib) / $(ws_get hwm_kib) KiB | $(ws_get client_cpu_pct) % |

Messages in the window by event: ${ws_events:-none}. gpufleet_websocket_clients during the fan-out:
${ws_gauge:-absent}, 2 s after: ${ws_gauge_after:-absent}. One GET of
gpu-metrics during the fan-out: $http_during. Agent exit status after SIGTERM: $stop_rc.
---- end ----
EOF
