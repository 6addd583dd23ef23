# The gpufleet agent as a container image: docker build -t gpufleet . (see deploy/README.md).
# Two stages on Debian 12. The build stage runs the project's own steps, `make package` (scripts/install-deps.sh
# --build, the Release build, the dashboard, scripts/package.sh), exactly as CI runs them; the runtime stage
# holds the stripped binary, the dashboard and the Debian packages scripts/package.sh found the binary needs.
# NVML is not in the image: the NVIDIA container runtime mounts the host driver's libnvidia-ml.so.1.

# Debian 12 with Node 20: the dashboard's Vite needs Node >= 20.19, newer than Debian 12's own nodejs.
FROM node:20-bookworm AS build
WORKDIR /src
COPY . .
RUN make package DEPS_ARGS=--build PACKAGE_DIR=/stage

FROM debian:12-slim
COPY --from=build /stage/ /
RUN apt-get update \
 && apt-get install -y --no-install-recommends $(cat /usr/local/share/gpufleet/runtime-packages.txt) ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# The store and the token live here; mount a host path (deploy/kubernetes uses /var/lib/gpufleet).
VOLUME /var/lib/gpufleet
ENV GPUFLEET_DB=/var/lib/gpufleet/gpufleet.db
EXPOSE 9401
ENTRYPOINT ["/usr/local/bin/gpufleet"]
# The dashboard is found at /usr/local/share/gpufleet/web, beside the binary's prefix.
CMD ["serve", "--listen", "0.0.0.0:9401"]
