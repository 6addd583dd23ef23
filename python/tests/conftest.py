"""Real agents for the package's tests: `gpufleet serve` on the fake NVML, on a free loopback port, with
a temporary store and agent socket; stopped by pid when the tests end.

GF_BINARY names the binary and GF_FAKE_NVML the fake NVML library (ctest sets both).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package from the source tree

import gpufleet  # noqa: E402
from gpufleet import gpu_monitor  # noqa: E402

# Three GPUs whose readings never change: GPU 0 idle, GPU 1 half used, GPU 2 full and busy.
SCENARIO = {
    "driver_version": "535.0",
    "cuda_driver_version": 12020,
    "gpus": [
        {"uuid": f"GPU-00000000-0000-4000-8000-00000000000{i + 1}", "name": "NVIDIA A100-SXM4-80GB",
         "pci_bus_id": f"00000000:0{i + 1}:00.0", "memory_total_mib": 81920, "memory_used_mib": used,
         "utilization_gpu_pct": util, "utilization_memory_pct": 5, "temperature_c": temp,
         "power_draw_w": power, "power_limit_w": 400.0}
        for i, (used, util, temp, power) in enumerate([(1000, 10, 40, 100.0), (40000, 30, 50, 200.0),
                                                       (80000, 90, 70, 350.0)])
    ],
}


def _required(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set (ctest sets it; run `ctest -R python_package`)", pytrace=False)
    return v


class Agent:
    """One `gpufleet serve`."""

    def __init__(self, tmp: Path, name: str, extra: Optional[List[str]] = None, socket: bool = True,
                 env: Optional[Dict[str, str]] = None) -> None:
        self.dir = tmp / name
        self.dir.mkdir()
        self.socket = str(self.dir / "agent.sock") if socket else None
        port_file = self.dir / "port"
        args = [_required("GF_BINARY"), "serve", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
                "--db", str(self.dir / "agent.db"), "--interval", "0.2", "--node-name", name,
                "--socket", self.socket or "none", *(extra or [])]
        self.log = open(self.dir / "agent.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env if env is not None else fake_nvml_env(tmp))
        deadline = time.monotonic() + 15
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"gpufleet serve did not start: {(self.dir / 'agent.log').read_text()}")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        while self.socket and not os.path.exists(self.socket):  # the socket comes after the port
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail("the agent made no socket")
            time.sleep(0.02)

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def fake_nvml_env(tmp: Path) -> Dict[str, str]:
    """The environment that makes gpufleet (agent or CLI) read the fake NVML with SCENARIO."""
    scenario = tmp / "scenario.json"
    if not scenario.exists():
        scenario.write_text(json.dumps(SCENARIO))
    env = dict(os.environ)
    env["GPUFLEET_NVML_LIBRARY"] = _required("GF_FAKE_NVML")
    env["FAKE_NVML_SCENARIO"] = str(scenario)
    return env


# Where no GPU stack can be found: no NVML library, no nvidia-smi, no sysfs with an amdgpu or Intel card. The
# simulated backend is only used when asked for, so gpufleet finds no GPU at all.
NO_GPU_ENV = {"GPUFLEET_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1",
              "GPUFLEET_NVIDIA_SMI": "/nonexistent/nvidia-smi",
              "GPUFLEET_SYSFS_ROOT": "/nonexistent-sysfs"}


def no_gpu_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FAKE_NVML_SCENARIO", "GPUFLEET_SIM_SCENARIO")}
    env.update(NO_GPU_ENV)
    return env


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gpufleet-py")


@pytest.fixture(scope="session")
def agent(tmp_root):
    a = Agent(tmp_root, "node-a")
    yield a
    a.stop()


@pytest.fixture(scope="session")
def cluster_agent(tmp_root, agent):
    """A second agent whose fleet view is the first one."""
    cfg = tmp_root / "cluster.json"
    cfg.write_text(json.dumps({"agents": [agent.url], "refresh_interval_s": 1, "timeout_s": 2}))
    a = Agent(tmp_root, "head", ["--cluster-config", str(cfg)], socket=False)
    deadline = time.monotonic() + 20
    while True:  # the first fleet refresh runs in the background
        try:
            if a.get("/api/v1/cluster/nodes")["nodes"]:
                break
        except Exception:  # 503 cluster_not_ready until then
            pass
        if time.monotonic() > deadline:
            a.stop()
            pytest.fail("the fleet view never filled")
        time.sleep(0.05)
    yield a
    a.stop()


def _fresh_monitor() -> None:
    gpu_monitor._monitor = None  # the singleton keeps a 5 s cache; each test starts without one


@pytest.fixture
def use_agent(agent, monkeypatch):
    """The package pointed at the agent: HTTP and socket."""
    monkeypatch.setenv("GPUFLEET_URL", agent.url)
    monkeypatch.setenv("GPUFLEET_SOCKET", agent.socket)
    monkeypatch.setenv("GPUFLEET_BIN", "/nonexistent/gpufleet")  # an agent test must not pass by the fallback
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    _fresh_monitor()
    yield agent
    _fresh_monitor()


@pytest.fixture
def no_agent(tmp_path, monkeypatch):
    """No agent at all (a refused port, no socket); the binary on the fake NVML with its own store."""
    monkeypatch.setenv("GPUFLEET_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUFLEET_SOCKET", "none")
    monkeypatch.setenv("GPUFLEET_BIN", _required("GF_BINARY"))
    monkeypatch.setenv("GPUFLEET_DB", str(tmp_path / "cli.db"))
    for k, v in fake_nvml_env(tmp_path).items():
        if k in ("GPUFLEET_NVML_LIBRARY", "FAKE_NVML_SCENARIO"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    _fresh_monitor()
    yield
    _fresh_monitor()


@pytest.fixture
def no_gpu(tmp_path, monkeypatch):
    """A machine without GPUs and without an agent: the binary finds no backend."""
    monkeypatch.setenv("GPUFLEET_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUFLEET_SOCKET", "none")
    monkeypatch.setenv("GPUFLEET_BIN", _required("GF_BINARY"))
    monkeypatch.setenv("GPUFLEET_DB", str(tmp_path / "cli.db"))
    for k, v in NO_GPU_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("FAKE_NVML_SCENARIO", raising=False)
    monkeypatch.delenv("GPUFLEET_SIM_SCENARIO", raising=False)
    _fresh_monitor()
    yield
    _fresh_monitor()


@pytest.fixture
def point_at(monkeypatch):
    """point_at(agent): the package talks to that agent only (never the binary), with no cached reading."""
    def point(a: Agent) -> None:
        monkeypatch.setenv("GPUFLEET_URL", a.url)
        monkeypatch.setenv("GPUFLEET_SOCKET", a.socket or "none")
        monkeypatch.setenv("GPUFLEET_BIN", "/nonexistent/gpufleet")
        _fresh_monitor()
    yield point
    _fresh_monitor()


@pytest.fixture
def make_agent(tmp_path):
    """make_agent(name, extra, no_gpus): agents of this test alone, stopped when it ends. no_gpus: on a
    machine where no GPU stack can be found (NO_GPU_ENV) instead of the fake NVML."""
    started: List[Agent] = []

    def make(name: str, extra: Optional[List[str]] = None, no_gpus: bool = False) -> Agent:
        a = Agent(tmp_path, name, extra, env=no_gpu_env() if no_gpus else None)
        started.append(a)
        return a
    yield make
    for a in started:
        a.stop()


@pytest.fixture
def gf():
    return gpufleet
