#!/usr/bin/env bash
# The nvidia-smi path's CPU per collection before and after its paced health queries (issue 21):
# `gpufleet --backend nvidia-smi monitor` (a long-running reader: remapped rows every 30 s, -q -x every
# 60 s, /dev/kmsg polled each collection) on the fake nvidia-smi's 8 GPUs, user+system seconds of
# gpufleet and its children divided by the collections it made.
#   Usage: bench/smi_health_bench.sh AFTER_BINARY [BEFORE_BINARY] [SECONDS] [INTERVAL]
#   Defaults: 65 s at 0.2 s (so each run holds 3 remapped-rows runs and 2 -q -x runs, as a steady state
#   does); QUICK=1: 20 s. Run as root so /dev/kmsg is really read.
set -euo pipefail
cd "$(dirname "$0")/.."
after=${1:?usage: bench/smi_health_bench.sh AFTER_BINARY [BEFORE_BINARY] [SECONDS] [INTERVAL]}
before=${2:-}
secs=${3:-65}
[[ "${QUICK:-}" == 1 ]] && secs=20
interval=${4:-0.2}
export GPUFLEET_NVIDIA_SMI=$PWD/tests/fakes/fake-nvidia-smi FAKE_NVIDIA_SMI_MODE=normal NO_COLOR=1
export GPUFLEET_NVML_LIBRARY=/nonexistent GPUFLEET_SOCKET=none
trap 'rm -f /tmp/gf-smi-bench.json' EXIT
TIMEFORMAT='%U %S'
echo "== nvidia-smi path, 8 GPUs (fake), every ${interval} s for ${secs} s; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for which in before after; do
  bin=$([[ $which == before ]] && echo "$before" || echo "$after")
  [[ -z "$bin" ]] && continue
  t=$( { time nice -n -15 "$bin" --backend nvidia-smi monitor -n "$interval" --no-series -o /tmp/gf-smi-bench.json \
         -- sleep "$secs" >/dev/null 2>&1; } 2>&1 )
  n=$(grep -o '"sample_count": [0-9]*' /tmp/gf-smi-bench.json | head -1 | grep -o '[0-9]*$')
  awk -v w=$which -v t="$t" -v n="$n" 'BEGIN { split(t, a, " "); cpu = a[1] + a[2];
    printf "%-7s collections %s  cpu %.2f s  = %.1f ms per collection\n", w, n, cpu, cpu / n * 1000 }'
done
# What each extra run costs with this fake (a bash script: the real tool costs what its driver calls do).
for args in "--query-gpu=index,uuid,pci.bus_id,memory.total,memory.used,name --format=csv,noheader,nounits" \
            "--query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits" \
            "-q -x"; do
  # shellcheck disable=SC2086
  t=$( { time for _ in 1 2 3 4 5 6 7 8 9 10; do "$GPUFLEET_NVIDIA_SMI" $args >/dev/null; done; } 2>&1 )
  label=${args%%=*}
  [[ $label == "-q -x" ]] || label="$label=…"
  awk -v a="$label" -v t="$t" 'BEGIN { split(t, x, " "); printf "  fake %-24s %.1f ms cpu per run\n", a, (x[1] + x[2]) * 100 }'
done
