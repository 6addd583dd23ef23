#!/usr/bin/env bash
# Kubernetes lists at fleet scale: `gpufleet cluster nodes --kubeconfig` against the API server stand-in
# (tests/fakes/kube_standin.*) holding NODES nodes (8 nvidia.com/gpu each) and PODS pods (a quarter of them
# asking for 1–2 GPUs, a tenth Succeeded), read in pages of 500 (`limit`/`continue`, as kubectl does).
# Prints the wall time and peak memory of gpufleet (/usr/bin/time -v) and how many pages it read.
#
#   GF_BINARY=build/gpufleet GF_STANDIN=build/tests/standin bench/kube_list_bench.sh [NODES] [PODS] [RUNS]
set -euo pipefail
GF_BINARY=${GF_BINARY:-build/gpufleet}
GF_STANDIN=${GF_STANDIN:-build/tests/standin}
NODES=${1:-10000}
PODS=${2:-100000}
RUNS=${3:-3}
T=$(mktemp -d /tmp/gf-kube-bench.XXXXXX)
sp=
cleanup() {
  [[ -n $sp ]] && kill "$sp" 2>/dev/null && wait "$sp" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

# The generator: pods as the API server lists them (metadata, spec with containers and resources, status).
python3 - "$T/fixture.json" "$NODES" "$PODS" <<'PY'
import json, random, sys
out, nodes, pods = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(11)
def node(i):
    name = f"gpu-node-{i:05d}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-n{i}", "resourceVersion": str(1000 + i),
                         "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                    "node.kubernetes.io/instance-type": "p5.48xlarge"}},
            "spec": {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24"},
            "status": {"capacity": {"cpu": "192", "memory": "2097152Mi", "nvidia.com/gpu": "8", "pods": "110"},
                       "allocatable": {"cpu": "191", "memory": "2000000Mi", "nvidia.com/gpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
def pod(i):
    gpus = rnd.choice([1, 2]) if i % 4 == 0 else 0
    res = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    if gpus:
        res["requests"]["nvidia.com/gpu"] = res["limits"]["nvidia.com/gpu"] = str(gpus)
    phase = "Succeeded" if i % 10 == 9 else "Running"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"job-{i:06d}", "namespace": f"team-{i % 50}", "uid": f"uid-p{i}",
                         "labels": {"app": f"trainer-{i % 300}"}},
            "spec": {"nodeName": f"gpu-node-{rnd.randrange(nodes):05d}",
                     "containers": [{"name": "main", "image": "registry.local/train:1.4", "resources": res}]},
            "status": {"phase": phase,
                       "containerStatuses": [{"name": "main", "ready": True, "state": {"running": {}}}]}}
with open(out, "w") as f:
    json.dump({"nodes": [node(i) for i in range(nodes)], "pods": [pod(i) for i in range(pods)]}, f)
PY
echo "== fixture: $NODES nodes, $PODS pods ($(($(stat -c %s "$T/fixture.json") / 1048576)) MiB of JSON)"
# The stand-in serves until its stdin closes: a sleep holds it open. Its first line is its URL, then one
# line per request.
"$GF_STANDIN" kube --fixture "$T/fixture.json" < <(exec sleep infinity) >"$T/requests.log" &
sp=$!
for _ in $(seq 1 600); do [[ -s $T/requests.log ]] && break; sleep 0.1; done
url=$(head -1 "$T/requests.log")
[[ $url == http* ]] || { echo "the stand-in did not start" >&2; exit 1; }
cat >"$T/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "$url"}}]
users: [{name: bench, user: {token: bench}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
EOF

echo "== gpufleet cluster nodes --kubeconfig: $NODES nodes + $PODS pods in pages of 500, $RUNS runs"
for _ in $(seq 1 "$RUNS"); do
  /usr/bin/time -f '%e %M' -o "$T/time" "$GF_BINARY" cluster nodes --json --kubeconfig "$T/kubeconfig" >"$T/out.json"
  read -r wall kib <"$T/time"
  echo "wall ${wall} s  peak RSS $((kib / 1024)) MiB"
done
python3 - "$T/out.json" "$T/requests.log" "$RUNS" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
runs = int(sys.argv[3])
reqs = [json.loads(l) for l in list(open(sys.argv[2]))[1:] if l.strip()]
nodes = doc["nodes"]
print(f"nodes listed {len(nodes)}, GPUs requested {sum(n['requested_gpus'] for n in nodes)}, "
      f"per run {len(reqs) // runs} list requests ({sum('/nodes' in r['path'] for r in reqs) // runs} node pages, "
      f"{sum('/pods' in r['path'] for r in reqs) // runs} pod pages)")
PY
