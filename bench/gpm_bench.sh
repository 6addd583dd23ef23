#!/usr/bin/env bash
# CPU that NVML GPM (profiling) sampling costs at 1 Hz with 8 GPUs, on the fake NVML whose GPM calls spin
# for what they cost on a real H100 (nvmlGpmSampleGet 77 us, nvmlGpmMetricsGet for 12 metrics 1620 us;
# tests/fixtures/nvml/eight_h100_gpm.json). One `gpufleet monitor -n 1` per GPM interval (off, 10 s: the
# default, 1 s: every collection), and once more at 1 s with free GPM calls (gpufleet's own share).
# Then GPM per MIG instance: the same 8 H100s in MIG mode, 7 GPU instances (1g.10gb) each, every one
# sampled with nvmlGpmMigSampleGet (assumed to cost what nvmlGpmSampleGet does: 77 us), against the same
# MIG node with GPM off.
# Usage: bench/gpm_bench.sh [SECONDS]   (GF_BENCH_BUILD: the build directory, default build; MIG_ONLY=1:
# only the MIG rows)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${GF_BENCH_BUILD:-build}
D=${1:-30}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export GPUFLEET_NVML_LIBRARY=$PWD/$B/tests/libnvidia-ml-fake.so
export NO_COLOR=1 GPUFLEET_SOCKET=none
costly=$PWD/tests/fixtures/nvml/eight_h100_gpm.json
free=$tmp/free.json
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s["gpm_call_cost_us"]={}; json.dump(s,open(sys.argv[2],"w"))' \
  "$costly" "$free"
# 8 H100s, each in MIG mode with 7 x 1g.10gb GPU instances that have GPM counters of their own; the whole
# GPU's nvmlGpmSampleGet answers NOT_SUPPORTED, as in MIG mode.
mig=$tmp/mig.json mig_free=$tmp/mig_free.json
python3 - "$costly" "$mig" "$mig_free" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["gpm_call_cost_us"]["nvmlGpmMigSampleGet"] = s["gpm_call_cost_us"]["nvmlGpmSampleGet"]
metrics = s["gpu_defaults"]["gpm_metrics"]
for g, gpu in enumerate(s["gpus"]):
    gpu.update({"mig_mode": 1, "gpm_sample_get": {"error": 3}, "utilization_gpu_pct": "not_supported",
                "utilization_memory_pct": "not_supported", "compute_processes": []})
    gpu["mig_devices"] = [{"index": i, "profile": "1g.10gb", "gpu_instance_id": 7 + i, "compute_instance_id": 0,
                           "uuid": "MIG-%08x-0000-5000-8000-%012x" % (g, i), "memory_total_mib": 9728,
                           "memory_used_mib": 1000, "gpm_metrics": metrics} for i in range(7)]
json.dump(s, open(sys.argv[2], "w"))
s["gpm_call_cost_us"] = {}
json.dump(s, open(sys.argv[3], "w"))
PY

echo "== GPM sampling CPU at 1 Hz, 8 GPUs, ${D} s per row; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %8s %9s %14s %12s\n' "case" samples "cpu (s)" "per collection" "of one core"
TIMEFORMAT='%U %S'
run() {  # label, scenario, interval
  local t
  t=$( { time FAKE_NVML_SCENARIO=$2 $B/gpufleet --backend nvml --gpm-interval "$3" monitor -n 1 --no-series \
           -o "$tmp/out.json" -- sleep "$D" >/dev/null 2>&1; } 2>&1 )
  local n
  n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sample_count"])' "$tmp/out.json")
  awk -v l="$1" -v t="$t" -v n="$n" -v d="$D" 'BEGIN { split(t, a, " "); c = a[1] + a[2];
    printf "%-34s %8d %9.3f %11.2f ms %11.3f %%\n", l, n, c, c / n * 1000, c / d * 100 }'
}
if [ -z "${MIG_ONLY:-}" ]; then
  run "GPM off (--gpm-interval 0)" "$costly" 0
  run "GPM every 10 s (default)" "$costly" 10
  run "GPM every 1 s" "$costly" 1
  run "GPM every 1 s, free calls" "$free" 1
fi
echo "-- 8 GPUs in MIG mode, 7 GPU instances each (56 sampled per GPM interval)"
run "MIG, GPM off" "$mig" 0
run "MIG, GPM every 10 s (default)" "$mig" 10
run "MIG, GPM every 1 s" "$mig" 1
run "MIG, GPM every 1 s, free calls" "$mig_free" 1
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
