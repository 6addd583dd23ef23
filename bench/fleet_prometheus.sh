# Sourced by bench/cluster_bench.sh and bench/health_query_bench.sh: a fleet of NODES × 8 GPUs as static
# pages in dcgm-exporter's text format (PAGES pages, served by python3 -m http.server), scraped by Debian's
# prometheus. After `fleet_up`:
#   T          a temporary folder (removed on exit, with every process in `pids`)
#   P          Prometheus' base URL; PROM_PID its pid
#   pids       the processes to stop on exit (a script may add its own)
# Settings (variables, before fleet_up): NODES, PAGES (10), SCRAPE (2s; 10s above 2 000 nodes, so that
# ingesting 80 000 series per metric leaves the machine quiet between scrapes), HEALTH=1 (every GPU also
# exports DCGM_FI_DEV_XID_ERRORS, DCGM_FI_DEV_ROW_REMAP_FAILURE and gpufleet_gpu_health{state}; 1 % of the
# GPUs with XID 79 or 13), ODD=1 (three odd nodes more, on the last page: `odd.stale+"q"`, whose GPU 7's
# utilization (0 %) carries its own time 70 s back, so it is stale at --max-age 60 and its name goes through the
# per-GPU sample-time query's escaped regex; `odd-mig`, whose GPU 0 has no framebuffer series of its own but
# two MIG instances'; `odd-noutil`, whose GPU 3 has memory but no utilization), HOLD=1 (print the URL and
# serve until killed, for profiling).
# shellcheck shell=bash

T=$(mktemp -d /tmp/gf-fleet-bench.XXXXXX)
pids=()
fleet_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap fleet_cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# fleet_pages DIR: writes DIR/p0.txt … (the same values for the same NODES and PAGES, run after run).
fleet_pages() {
  python3 - "$1" "$NODES" "$PAGES" "${HEALTH:-}" "${ODD:-}" <<'PY'
import random, sys, time
out, nodes, pages, health, odd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5] == "1"
rnd = random.Random(7)
per = (nodes + pages - 1) // pages
metrics = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"]
if health:
    metrics += ["DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpufleet_gpu_health"]
for p in range(pages):
    rows = {m: [] for m in metrics}
    for n in range(p * per, min(nodes, (p + 1) * per)):
        host = f"gpu-node-{n:05d}"
        for g in range(8):
            util, used = rnd.randrange(100), rnd.randrange(81559)
            labels = (f'gpu="{g}",UUID="GPU-{n:05d}-{g}",pci_bus_id="00000000:{g:02X}:00.0",device="nvidia{g}",'
                      f'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",DCGM_FI_DRIVER_VERSION="535.129.03"')
            values = [util, used, 81559 - used, 30 + util // 2, 100 + util * 6]
            state = "ok"
            if health:
                xid = rnd.choice([79, 13]) if rnd.random() < 0.01 else 0
                state = "unhealthy" if xid == 79 else "ok"
                values += [xid, 0, 1]
            for m, v in zip(metrics, values):
                rows[m].append(f'{m}{{{labels},state="{state}"}} {v}' if m == "gpufleet_gpu_health"
                               else f"{m}{{{labels}}} {v}")
    if odd and p == pages - 1:
        past = int(time.time() * 1000) - 70000
        for host, g in [('odd.stale+\\"q\\"', gg) for gg in range(8)] + [("odd-mig", gg) for gg in range(8)] + \
                       [("odd-noutil", gg) for gg in range(8)]:
            labels = (f'gpu="{g}",UUID="GPU-{host[:8]}-{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"')
            util, used = 10 * g, 1000 * (g + 1)
            when = ""
            if host.startswith("odd.stale") and g == 7:
                util, when = 0, f" {past}"  # idle when fresh: --max-age 60 counts one idle GPU fewer
            if not (host == "odd-noutil" and g == 3):
                rows["DCGM_FI_DEV_GPU_UTIL"].append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util}{when}")
            if host == "odd-mig" and g == 0:
                for i in (1, 2):
                    rows["DCGM_FI_DEV_FB_USED"].append(f'DCGM_FI_DEV_FB_USED{{{labels},GPU_I_ID="{i}"}} {used * i}')
                    rows["DCGM_FI_DEV_FB_FREE"].append(f'DCGM_FI_DEV_FB_FREE{{{labels},GPU_I_ID="{i}"}} {20000 * i}')
            else:
                rows["DCGM_FI_DEV_FB_USED"].append(f"DCGM_FI_DEV_FB_USED{{{labels}}} {used}")
                rows["DCGM_FI_DEV_FB_FREE"].append(f"DCGM_FI_DEV_FB_FREE{{{labels}}} {81559 - used}")
    with open(f"{out}/p{p}.txt", "w") as f:
        for m in metrics:
            f.write(f"# HELP {m} {m}.\n# TYPE {m} gauge\n" + "\n".join(rows[m]) + "\n")
PY
}

# wait_count QUERY WANT SECONDS: until count(QUERY) is WANT, else the error and exit 1.
wait_count() {
  local got= i
  for i in $(seq 1 $(($3 * 5))); do
    got=$(curl -sfG --data-urlencode "query=count($1)" "$P/api/v1/query" 2>/dev/null |
          sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p' || true)
    [[ $got == "$2" ]] && return 0
    sleep 0.2
  done
  echo "Prometheus has ${got:-no} series of $1 after $3 s, expected $2" >&2
  tail -5 "$T/prometheus.log" >&2
  exit 1
}

fleet_up() {
  PAGES=${PAGES:-10}
  if [[ -z ${SCRAPE:-} ]]; then SCRAPE=2s; ((NODES > 2000)) && SCRAPE=10s; fi
  mkdir -p "$T/www"
  fleet_pages "$T/www"
  local wp pp p
  wp=$(free_port)
  python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$wp" >"$T/http.log" 2>&1 &
  pids+=("$!")
  {
    echo "global: {scrape_interval: $SCRAPE, scrape_timeout: $SCRAPE, evaluation_interval: $SCRAPE}"
    echo "scrape_configs:"
    for p in $(seq 0 $((PAGES - 1))); do
      echo "  - {job_name: dcgm-$p, metrics_path: /p$p.txt, static_configs: [{targets: ['127.0.0.1:$wp']}]}"
    done
  } >"$T/prometheus.yml"
  pp=$(free_port)
  prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" --web.listen-address=127.0.0.1:$pp \
    >"$T/prometheus.log" 2>&1 &
  PROM_PID=$!
  pids+=("$PROM_PID")
  P=http://127.0.0.1:$pp
  local odd_util=0
  [[ -n ${ODD:-} ]] && odd_util=23  # 8 + 8 + 7 utilization series
  wait_count 'timestamp(DCGM_FI_DEV_GPU_UTIL)' $((NODES * 8 + odd_util)) 180
  if [[ -n ${HEALTH:-} ]]; then wait_count gpufleet_gpu_health $((NODES * 8)) 60; fi
  sleep "${SCRAPE%s}"  # every family scraped at least once more
  if [[ -n ${HOLD:-} ]]; then
    echo "prometheus $P (pid $PROM_PID)"
    sleep infinity
  fi
}
