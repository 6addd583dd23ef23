"""The seeds' controller classes (issue 23, item 7) end to end: DockerController through `gpufleet run
--docker` against the Docker stand-in, DirectBenchmarkController around a stand-in genai-bench, and
OMEController through `gpufleet cluster place --apply` against the Kubernetes stand-in; imported from the
seeds' module paths (python/examples/src/controllers) as seed code does."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import _required

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))  # the seeds' module paths: src.controllers.*

from src.controllers.direct_benchmark_controller import DirectBenchmarkController  # noqa: E402
from src.controllers.docker_controller import DockerController  # noqa: E402
from src.controllers.ome_controller import OMEController  # noqa: E402


class Standin:
    """`standin KIND ARGS`: where it listens, and the requests it was sent (one JSON line each)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([_required("GF_STANDIN"), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.address = self.proc.stdout.readline().strip()
        assert self.address, "the stand-in printed no address"
        self.requests: List[Dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.requests.append(json.loads(line))

    def wait_for(self, method: str, suffix: str, timeout: float = 20) -> Dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in self.requests:
                if r["method"] == method and r["path"].endswith(suffix):
                    return r
            time.sleep(0.05)
        raise AssertionError(f"no {method} …{suffix} in {[(r['method'], r['path']) for r in self.requests]}")

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def docker_engine(monkeypatch):
    engine = Standin("docker", "--run-time-ms", "600000")  # a server: runs until stopped
    monkeypatch.setenv("DOCKER_HOST", "unix://" + engine.address)
    yield engine
    engine.stop()


def _leases(tmp_path) -> list:
    out = subprocess.run([_required("GF_BINARY"), "leases", "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["leases"]


def test_docker_controller_serves_on_leased_gpus_and_removes_the_container(no_agent, docker_engine, tmp_path):
    models = tmp_path / "models"
    (models / "tiny-llama").mkdir(parents=True)
    c = DockerController(docker_model_path=str(models), verbose=True, wait_seconds=10)
    name = c.deploy_inference_service(task_name="tune", experiment_id=3, namespace="autotuner",
                                      model_name="tiny-llama", runtime_name="sglang",
                                      parameters={"tp-size": 2, "mem-fraction-static": 0.8})
    assert name == "tune-exp3"
    create = json.loads(docker_engine.wait_for("POST", "/containers/create")["body"])
    assert create["Image"] == "lmsysorg/sglang:latest"
    devices = create["HostConfig"]["DeviceRequests"]
    assert len(devices) == 1 and len(devices[0]["DeviceIDs"]) == 2  # tp 2: one DeviceRequest, two GPUs
    assert not any(e.startswith("CUDA_VISIBLE_DEVICES=") for e in create["Env"])
    assert create["HostConfig"]["Binds"] == [f"{models}/tiny-llama:/model:ro"]
    url = c.get_service_url(name)
    port = url.rsplit(":", 1)[1]
    assert create["HostConfig"]["PortBindings"]["8000/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": port}]
    assert create["Cmd"][:4] == ["python3", "-m", "sglang.launch_server", "--model-path"]
    assert create["Cmd"][-6:] == ["--port", "8000", "--tp-size", "2", "--mem-fraction-static", "0.8"]
    held = _leases(tmp_path)
    assert len(held) == 1 and len(held[0]["gpus"]) == 2 and held[0]["name"] == "tune-exp3"

    assert c.delete_inference_service(name, "autotuner") is True
    docker_engine.wait_for("POST", "/stop")
    docker_engine.wait_for("DELETE", "")  # removed, as docker run --rm
    assert _leases(tmp_path) == []
    assert c.get_service_url(name) is None
    assert c.delete_inference_service(name) is False
    assert c.deploy_inference_service("t", 1, "ns", "m", "no-such-runtime", {}) is None


def test_docker_controller_gives_up_when_no_gpus_come(no_agent, docker_engine, tmp_path):
    c = DockerController(docker_model_path=str(tmp_path), wait_seconds=0.5)
    # 16 GPUs: the node has 3.
    assert c.deploy_inference_service("big", 1, "ns", "m", "vllm", {"tp-size": 16}) is None
    assert not [r for r in docker_engine.requests if r["path"].endswith("/containers/create")]


GENAI_BENCH = """#!/usr/bin/env python3
import json, os, sys, time
args = sys.argv[1:]
base = args[args.index("--experiment-base-dir") + 1]
os.makedirs(os.path.join(base, "run"), exist_ok=True)
time.sleep(0.6)
with open(os.path.join(base, "run", "result.json"), "w") as f:
    json.dump({"args": args, "mean_output_throughput_tokens_per_s": 123.5}, f)
sys.exit(int(os.environ.get("FAKE_BENCH_EXIT", "0")))
"""


def _genai_bench(tmp_path: Path) -> str:
    p = tmp_path / "genai-bench"
    p.write_text(GENAI_BENCH)
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def test_direct_benchmark_controller_monitors_the_gpus_around_the_benchmark(use_agent, tmp_path):
    c = DirectBenchmarkController(genai_bench=_genai_bench(tmp_path), monitor_interval=0.1)
    spec = {"task": "text-to-text", "num_concurrency": [1, 4], "api_backend": "openai", "traffic_scenario": "D(100,100)"}
    r = c.run_benchmark_job("http://127.0.0.1:8000", spec, gpu_indices=[0])
    assert r["success"] is True and r["returncode"] == 0
    args = r["results"][0]["args"]
    assert args[:3] == ["benchmark", "--api-base", "http://127.0.0.1:8000"]
    assert args.count("--num-concurrency") == 2 and "--traffic-scenario" in args
    m = r["gpu_monitoring"]
    assert m is not None and m["sample_count"] >= 2
    assert set(m) == {"monitoring_duration_seconds", "sample_count", "gpu_stats"}
    assert m["gpu_stats"]["0"]["utilization"]["mean"] == 10.0  # the scenario's GPU 0


def test_direct_benchmark_controller_without_gpus_reports_none(no_gpu, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_BENCH_EXIT", "3")
    r = DirectBenchmarkController(genai_bench=_genai_bench(tmp_path)).run_benchmark_job("http://x:1", {})
    assert r["gpu_monitoring"] is None
    assert r["success"] is False and r["returncode"] == 3
    missing = DirectBenchmarkController(genai_bench=str(tmp_path / "none")).run_benchmark_job("http://x:1", {})
    assert missing["success"] is False and "not found" in missing["error"]


TOKEN = "standin-token"


@pytest.fixture
def kube(tmp_path, monkeypatch):
    fixture = ROOT.parent / "tests" / "fixtures" / "kube" / "cluster.json"
    api = Standin("kube", "--fixture", str(fixture), "--token", TOKEN)
    config = tmp_path / "kubeconfig.yaml"
    config.write_text(f"apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: {api.address}\n"
                      f"users:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n- name: s\n"
                      "  context: {cluster: s, user: u}\ncurrent-context: s\n")
    monkeypatch.setenv("GPUFLEET_BIN", _required("GF_BINARY"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield api, str(config)
    api.stop()


ISVC = "/apis/ome.io/v1beta1/namespaces/autotuner/inferenceservices/"


def test_ome_controller_applies_the_seeds_inference_service_pinned_to_the_chosen_node(kube, capsys):
    api, config = kube
    c = OMEController(kubeconfig_path=config)
    name = c.deploy_inference_service(task_name="my-task", experiment_id="1", namespace="autotuner",
                                      model_name="llama-3-2-1b-instruct", runtime_name="sglang-llama-small",
                                      parameters={"tpsize": 2, "dp-size": 1})
    assert name == "my-task-exp1"
    patch = api.wait_for("PATCH", ISVC + "my-task-exp1")
    body = json.loads(patch["body"])
    assert body["metadata"]["labels"] == {"autotuner.io/task": "my-task", "autotuner.io/experiment-id": "1"}
    engine = body["spec"]["engine"]
    assert engine["runner"]["resources"]["limits"]["nvidia.com/gpu"] == 2  # world size, from the "tpsize" alias
    terms = engine["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    node = terms[0]["matchExpressions"][0]["values"][0]
    out = capsys.readouterr().out
    assert f"Created InferenceService 'my-task-exp1' in namespace 'autotuner' on node '{node}'" in out


def test_ome_controller_without_selection_leaves_the_node_to_kubernetes(kube):
    api, config = kube
    name = OMEController(kubeconfig_path=config).deploy_inference_service(
        "plain", 2, "autotuner", "m", "rt", {"tp-size": 1}, enable_gpu_selection=False)
    assert name == "plain-exp2"
    body = json.loads(api.wait_for("PATCH", ISVC + "plain-exp2")["body"])
    assert "affinity" not in body["spec"]["engine"]
