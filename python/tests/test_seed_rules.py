"""The seeds' defaults in the seed-named functions: the availability rule (a GPU with a small resident
process qualifies unless exclusive=True)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gpufleet
from conftest import SCENARIO, Agent, _fresh_monitor, _required

# SCENARIO with an Xorg-like process (pid 4242, 200 MiB) on the idle GPU 0.
XORG_SCENARIO = json.loads(json.dumps(SCENARIO))
XORG_SCENARIO["gpus"][0]["graphics_processes"] = [{"pid": 4242, "used_memory_mib": 200}]


def _env(tmp: Path):
    import os
    scenario = tmp / "xorg-scenario.json"
    scenario.write_text(json.dumps(XORG_SCENARIO))
    env = dict(os.environ)
    env["GPUFLEET_NVML_LIBRARY"] = _required("GF_FAKE_NVML")
    env["FAKE_NVML_SCENARIO"] = str(scenario)
    return env


@pytest.fixture(scope="module")
def xorg_agent(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xorg")
    a = Agent(tmp, "xorg-node", env=_env(tmp))
    yield a
    a.stop()


@pytest.fixture
def on_xorg_agent(xorg_agent, monkeypatch):
    monkeypatch.setenv("GPUFLEET_URL", xorg_agent.url)
    monkeypatch.setenv("GPUFLEET_SOCKET", xorg_agent.socket)
    monkeypatch.setenv("GPUFLEET_BIN", "/nonexistent/gpufleet")
    _fresh_monitor()
    yield xorg_agent
    _fresh_monitor()


def test_a_small_resident_process_passes_the_seeds_rule(on_xorg_agent):
    m = gpufleet.get_gpu_monitor()
    assert m.get_available_gpus(min_memory_mb=8000) == [0, 1]
    assert m.get_available_gpus(min_memory_mb=8000, exclusive=True) == [1]
    ok, msg = gpufleet.check_gpu_availability(2, min_memory_mb=8000)
    assert ok, msg
    ok, msg = gpufleet.check_gpu_availability(2, min_memory_mb=8000, exclusive=True)
    assert not ok and "4242" in msg
    assert gpufleet.select_gpus_for_task(1) == [0]
    assert gpufleet.select_gpus_for_task(1, exclusive=True) == [1]
    with pytest.raises(gpufleet.NoGpusAvailable):
        gpufleet.select_gpus_for_task(2, exclusive=True)


def test_the_route_says_which_rule(on_xorg_agent):
    doc = on_xorg_agent.get("/api/v1/availability?gpus=2")
    assert doc["exclusive"] is False and doc["available"] is True
    doc = on_xorg_agent.get("/api/v1/availability?gpus=2&exclusive=true")
    assert doc["exclusive"] is True and doc["available"] is False
    assert "4242" in doc["gpus"][0]["reason"]


def test_without_an_agent_the_fallback_applies_the_same_rule(tmp_path, monkeypatch):
    for k, v in _env(tmp_path).items():
        if k in ("GPUFLEET_NVML_LIBRARY", "FAKE_NVML_SCENARIO"):
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("GPUFLEET_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUFLEET_SOCKET", "none")
    monkeypatch.setenv("GPUFLEET_BIN", _required("GF_BINARY"))
    monkeypatch.setenv("GPUFLEET_DB", str(tmp_path / "cli.db"))
    _fresh_monitor()
    m = gpufleet.get_gpu_monitor()
    assert m.get_available_gpus(min_memory_mb=8000) == [0, 1]
    assert m.get_available_gpus(min_memory_mb=8000, exclusive=True) == [1]
    _fresh_monitor()


def test_the_seeds_estimate_without_an_agent(no_agent, caplog):
    import logging
    task = {"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [1, 2, 4], "pp-size": [1]}}
    assert gpufleet.estimate_gpu_requirements(task) == (4, 20000)
    weights = gpufleet.estimate_gpu_requirements(task, method="weights")
    assert weights[0] == 4 and weights[1] > 20000  # 70 B weights over 4 GPUs need more than the seed said
    with caplog.at_level(logging.WARNING, logger="gpufleet"):
        gpufleet.estimate_gpu_requirements({"parameters": {"tp-sizes": 2}})
    assert any("'tp-sizes'" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
