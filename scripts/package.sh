#!/usr/bin/env bash
# Stages what the container image (and any package) ships, from a Release build:
#   STAGE/usr/local/bin/gpufleet
#   STAGE/usr/local/share/gpufleet/web/                    the dashboard (web/dist)
#   STAGE/usr/local/share/gpufleet/runtime-packages.txt    the Debian packages the binary needs at run time
# and checks the result: the binary starts, and every shared library it loads (linked, or opened at run
# time: libcurl) belongs to a package in that list or to Debian's base system.
# Usage: scripts/package.sh BUILD_DIR STAGE_DIR   (the Makefile's `make package` builds first; the Dockerfile
# and CI both run it through `make package`).
set -euo pipefail
build=${1:?usage: scripts/package.sh BUILD_DIR STAGE_DIR}
stage=${2:?usage: scripts/package.sh BUILD_DIR STAGE_DIR}
cd "$(dirname "$0")/.."

bin="$build/gpufleet"
[[ -x "$bin" ]] || { echo "package: $bin is missing; run 'make build' first" >&2; exit 1; }
[[ -f web/dist/index.html ]] || { echo "package: web/dist is missing; run 'make web' first" >&2; exit 1; }

rm -rf "$stage"
install -d "$stage/usr/local/bin" "$stage/usr/local/share/gpufleet"
install -m 0755 "$bin" "$stage/usr/local/bin/gpufleet"
strip --strip-unneeded "$stage/usr/local/bin/gpufleet"
cp -r web/dist "$stage/usr/local/share/gpufleet/web"

# Libraries the dynamic linker loads, then those gpufleet opens itself (platform/http_client.cpp: libcurl;
# NVML comes from the NVIDIA driver on the host, never from the image).
mapfile -t libs < <(ldd "$bin" | awk '/=> \//{print $3}')
libs+=("$(ldconfig -p | awk '$1 == "libcurl.so.4" && /x86-64|x86_64|aarch64/ {print $NF; exit}')")
# Debian 12's base image has these (apt itself needs them).
base=(libc6 libgcc-s1 libstdc++6)
pkgs=()
for lib in "${libs[@]}"; do
  [[ -n "$lib" ]] || { echo "package: libcurl.so.4 not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
  real=$(readlink -f "$lib")
  # With Debian's merged /usr, dpkg records a library under /lib or /usr/lib, not always the path we see.
  owner=""
  for path in "$lib" "$real" "${real#/usr}" "/usr$lib"; do
    owner=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
    [[ -n "$owner" ]] && break
  done
  [[ -n "$owner" ]] || { echo "package: no Debian package owns $real ($lib)" >&2; exit 1; }
  [[ " ${base[*]} " == *" $owner "* ]] && continue
  [[ " ${pkgs[*]} " == *" $owner "* ]] || pkgs+=("$owner")
done
printf '%s\n' "${pkgs[@]}" | sort > "$stage/usr/local/share/gpufleet/runtime-packages.txt"

# The staged binary starts and answers; the image's entrypoint is this file.
"$stage/usr/local/bin/gpufleet" --version >/dev/null
"$stage/usr/local/bin/gpufleet" serve --help >/dev/null
echo "package: staged $(du -sh "$stage" | cut -f1) in $stage; runtime packages: $(paste -sd' ' "$stage/usr/local/share/gpufleet/runtime-packages.txt")"
