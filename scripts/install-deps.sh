#!/usr/bin/env bash
# Installs the Debian packages gpufleet needs to build and test, skipping those already installed.
# Usage: scripts/install-deps.sh [--ci]   (--ci adds what only CI needs: clang for the fuzzers)
set -euo pipefail

pkgs=(g++ make cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev libfmt-dev libcurl4-openssl-dev libboost-dev libsqlite3-dev
      libgtest-dev libgmock-dev libbenchmark-dev)
if [[ "${1:-}" == "--ci" ]]; then
  pkgs+=(clang libclang-rt-14-dev)
fi

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
