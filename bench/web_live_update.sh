#!/usr/bin/env bash
# The dashboard's cost per live update with 64 simulated GPUs (bench/RESULTS.md, "Dashboard"), and the
# bundle's gzipped size. Runs the browser test that measures it (web/tests/gpupage.test.mjs: an agent with
# --sim-gpus 64 updating every 500 ms, its alert rules off, the four charts seeded with 3600 rows per GPU,
# an hour of 1 s samples: the charts' whole window) and prints its figures with the load average. Needs build/gpufleet and web/dist (make web); GF_BINARY overrides the binary, GF_DIST the
# dashboard served (another commit's build, for a before/after).
set -euo pipefail
cd "$(dirname "$0")/.."
export GF_BINARY=${GF_BINARY:-build/gpufleet}
[ -x "$GF_BINARY" ] || { echo "no agent binary at $GF_BINARY (cmake --build build --target gpufleet)" >&2; exit 1; }
[ -f web/dist/index.html ] || make web
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F), $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
out=$(GF_MEASURE_ONLY=1 node web/tests/gpupage.test.mjs) || { echo "$out"; exit 1; }
grep -E '^#    (bundle|live update)' <<<"$out"
