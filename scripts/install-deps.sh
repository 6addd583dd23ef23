#!/usr/bin/env bash
# Installs the Debian packages gpufleet needs to build and test, skipping those already installed.
# Usage: scripts/install-deps.sh [--ci | --build]
#   --ci adds what only CI needs: clang for the fuzzers, clang-tidy, clang-format;
#   --build installs only what building the binary and the dashboard needs (the container image's build stage).
set -euo pipefail

pkgs=(g++ make cmake ninja-build ccache pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev libcurl4-openssl-dev libboost-dev libsqlite3-dev zlib1g-dev
      libyaml-cpp-dev                      # manifests (cluster place) and kubeconfig
      libssl-dev                           # the exec source's WebSocket over TLS (cluster/exec_client.cpp)
      sqlite3                              # tests read the agent's store as root (tests/integration/shared_node_test.cpp)
      libgtest-dev libgmock-dev libbenchmark-dev
      prometheus                           # tests/integration/prometheus_test.sh scrapes the agent with it
      chromium                             # web/tests/dashboard.test.mjs drives it (playwright-core; never a downloaded browser)
      python3-pytest python3-setuptools    # python/: the package's tests, and `pip install ./python` offline
      wrk prometheus-node-exporter)        # bench/http_bench.sh: the load, and the exporter people run today
if [[ "${1:-}" == "--ci" ]]; then
  pkgs+=(clang libclang-rt-14-dev clang-tidy clang-format)
elif [[ "${1:-}" == "--build" ]]; then
  pkgs=(g++ make cmake ninja-build ccache pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev libcurl4-openssl-dev
        libboost-dev libsqlite3-dev zlib1g-dev libyaml-cpp-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev binutils)
elif [[ -n "${1:-}" ]]; then
  echo "usage: scripts/install-deps.sh [--ci | --build]" >&2
  exit 2
fi
# web/ (the dashboard) builds with npm. This machine kind ships Node 20 + npm 11; Debian's are the fallback
# (Debian 12's Node 18 is too old for Vite 8: `make web` says so).
command -v npm >/dev/null || pkgs+=(nodejs npm)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "Installing missing packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "error: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
