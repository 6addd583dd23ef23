"""The seed API and leases against a real agent on the fake NVML (see conftest.SCENARIO)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import gpufleet
from gpufleet import gpu_scheduler


def test_query_gpus_is_what_the_agent_reports(use_agent):
    doc = use_agent.get("/api/v1/monitoring/gpu-metrics")
    snap = gpufleet.get_gpu_monitor().query_gpus(use_cache=False)
    assert snap is not None and len(snap.gpus) == len(doc["gpus"]) == 3
    for info, g in zip(snap.gpus, doc["gpus"]):
        assert isinstance(info, gpufleet.GPUInfo)
        assert (info.index, info.name) == (g["index"], g["name"])
        assert (info.memory_total_mb, info.memory_used_mb, info.memory_free_mb) == (
            g["memory"]["total"], g["memory"]["used"], g["memory"]["free"])
        assert info.utilization_percent == g["utilization"]
        assert info.temperature_c == g["temperature"]
        assert info.power_draw_w == g["power_usage"]
        # the seed's score: 0.6 x free fraction + 0.4 x idle fraction
        expect = 0.6 * info.memory_free_mb / info.memory_total_mb + 0.4 * (100 - info.utilization_percent) / 100
        assert info.score == pytest.approx(expect, abs=1e-3)
    assert snap.timestamp.tzinfo is not None
    assert gpufleet.get_gpu_monitor().is_available()


def test_query_cache_and_singleton(use_agent):
    m = gpufleet.get_gpu_monitor()
    assert m is gpufleet.get_gpu_monitor()
    first = m.query_gpus()
    assert m.query_gpus() is first  # within the 5 s TTL
    assert m.query_gpus(use_cache=False) is not first


def test_get_available_gpus_and_info(use_agent):
    m = gpufleet.get_gpu_monitor()
    assert m.get_available_gpus(min_memory_mb=8000) == [0, 1]  # GPU 2: 1920 MiB free, 90 % busy
    assert m.get_available_gpus(min_memory_mb=50000) == [0]
    assert m.get_available_gpus(max_utilization=20) == [0]
    assert m.get_available_gpus(max_utilization=100) == [0, 1, 2]  # best score first
    info = m.get_gpu_info(2)
    assert info is not None and (info.memory_used_mb, info.utilization_percent, info.temperature_c) == (80000, 90, 70)
    assert m.get_gpu_info(7) is None


def test_monitoring_statistics(use_agent):
    m = gpufleet.get_gpu_monitor()
    assert m.stop_monitoring() is None  # the seed: None when not started
    m.start_monitoring(interval_seconds=0.05)
    deadline = time.monotonic() + 30
    while len(m._samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = m.stop_monitoring()
    assert stats is not None and stats["sample_count"] >= 3
    assert set(stats) == {"monitoring_duration_seconds", "sample_count", "gpu_stats"}
    g1 = stats["gpu_stats"]["1"]
    assert g1["name"] == "NVIDIA A100-SXM4-80GB"
    assert g1["utilization"] == {"min": 30.0, "max": 30.0, "mean": 30.0, "samples": stats["sample_count"]}
    assert g1["memory_used_mb"]["mean"] == 40000.0
    assert g1["memory_usage_percent"]["max"] == pytest.approx(100 * 40000 / 81920)
    assert g1["temperature_c"]["min"] == 50.0 and g1["power_draw_w"]["mean"] == 200.0


TASK = {"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [1, 2, 4], "pp-size": [1], "dp-size": [1]}}


def test_estimate_is_the_agents(use_agent):
    import json
    import urllib.request
    req = urllib.request.Request(use_agent.url + "/api/v1/estimate", data=json.dumps(TASK).encode(), method="POST")
    with urllib.request.urlopen(req) as r:
        doc = json.loads(r.read())
    # The agent's own default is gpufleet's weights method; the seed's function asks for the seed's.
    assert doc["method"] == "weights"
    assert gpufleet.estimate_gpu_requirements(TASK, method="weights") == (doc["gpus"], doc["memory_mb_per_gpu"])
    assert doc["gpus"] == 4  # world size tp 4 x pp 1 x dp 1
    assert gpufleet.estimate_gpu_requirements(TASK) == (4, 20000)  # the seed's own example
    assert gpufleet.estimate_gpu_requirements(
        {"model": {"id_or_path": "llama-2-13b"}, "parameters": {"tpsize": [1, 2]}}) == (2, 12000)
    with pytest.raises(gpufleet.GpufleetError):
        gpufleet.estimate_gpu_requirements({"parameters": {"tp-size": "many"}})
    with pytest.raises(gpufleet.GpufleetError):
        gpufleet.estimate_gpu_requirements(TASK, method="guess")


def test_estimate_warns_on_a_key_that_looks_like_a_parallel_size(use_agent, caplog):
    import logging
    with caplog.at_level(logging.WARNING, logger="gpufleet"):
        assert gpufleet.estimate_gpu_requirements(
            {"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tensor-parallel-sizes": [1, 2, 4]}}) == (1, 20000)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'tensor-parallel-sizes'" in warnings[0].getMessage()
    assert "'tensor-parallel-size'" in warnings[0].getMessage()


def test_check_and_select(use_agent):
    ok, msg = gpufleet.check_gpu_availability(2, min_memory_mb=8000)
    assert ok and "[0, 1]" in msg
    ok, msg = gpufleet.check_gpu_availability(3, min_memory_mb=8000)
    assert not ok and "GPU 2" in msg
    assert gpufleet.select_gpus_for_task(2) == [0, 1]
    assert gpufleet.select_gpus_for_task(1, min_memory_mb=50000) == [0]
    with pytest.raises(RuntimeError):  # the seed's exception type still catches it
        gpufleet.select_gpus_for_task(3)
    with pytest.raises(gpufleet.NoGpusAvailable):
        gpufleet.select_gpus_for_task(3)


def _active(agent):
    return agent.get("/api/v1/leases")["leases"]


def test_lease_sets_env_and_releases(use_agent, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    with gpufleet.lease(gpus=2, min_memory_mb=8000) as held:
        assert held.via == "agent" and sorted(held.indices) == [0, 1]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == held.cuda_visible_devices
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        leases = _active(use_agent)
        assert [lz["id"] for lz in leases] == [held.id]
        assert leases[0]["owner"]["uid"] == os.getuid()  # the agent's SO_PEERCRED, not our word
        assert leases[0]["tie"] == "connection"
        assert not gpufleet.check_gpu_availability(1, 8000)[0]  # the agent counts the lease
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "7"
    assert "CUDA_DEVICE_ORDER" not in os.environ
    assert _active(use_agent) == []


def test_two_leases_never_share_a_gpu(use_agent):
    with gpufleet.lease(gpus=1) as a, gpufleet.lease(gpus=1) as b:
        assert set(a.indices).isdisjoint(b.indices)
        assert sorted(a.indices + b.indices) == [0, 1]
        with pytest.raises(gpufleet.NoGpusAvailable):  # GPU 2 never qualifies
            with gpufleet.lease(gpus=1):
                pass
        assert len(_active(use_agent)) == 2
    assert _active(use_agent) == []


def test_lease_released_on_exception(use_agent):
    with pytest.raises(KeyError):
        with gpufleet.lease(gpus=1):
            assert len(_active(use_agent)) == 1
            raise KeyError("the job failed")
    assert _active(use_agent) == []
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_lease_wait_times_out(use_agent):
    with gpufleet.lease(gpus=2):
        with pytest.raises(gpufleet.Timeout):
            with gpufleet.lease(gpus=1, wait_seconds=1):
                pass
    assert _active(use_agent) == []


def test_wait_is_woken_by_the_agent_not_by_check_interval(use_agent, monkeypatch):
    # Sleeping is the seed's polling: forbidden here, and check_interval is an hour. Returning True at all
    # proves a live update from /ws woke the wait after the release.
    def no_sleep(_s):
        raise AssertionError("wait_for_gpu_availability polled instead of listening to the agent")
    monkeypatch.setattr(gpu_scheduler.time, "sleep", no_sleep)
    held = gpufleet.acquire(gpus=1)
    assert not gpufleet.check_gpu_availability(2, 8000)[0]
    releaser = threading.Timer(0.3, held.release)
    releaser.start()
    try:
        ok, msg = gpufleet.wait_for_gpu_availability(2, min_memory_mb=8000, timeout_seconds=240, check_interval=3600)
    finally:
        releaser.join()
    assert ok, msg
    assert _active(use_agent) == []


def test_wait_gives_up_at_its_timeout(use_agent):
    ok, msg = gpufleet.wait_for_gpu_availability(3, min_memory_mb=8000, timeout_seconds=1, check_interval=30)
    assert not ok and "after waiting 1s" in msg


def test_lease_ends_when_the_process_dies(use_agent, tmp_path):
    # A connection-tied lease cannot outlive its holder: a killed Python process frees its GPUs.
    ready = tmp_path / "ready"
    code = ("import gpufleet, pathlib, time\n"
            f"l = gpufleet.acquire(gpus=1)\npathlib.Path({str(ready)!r}).write_text(l.id)\ntime.sleep(600)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(gpufleet.__file__).parents[1]))
    p = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.02)
        assert ready.exists(), "the child took no lease"
        assert [lz["id"] for lz in _active(use_agent)] == [ready.read_text()]
    finally:
        p.kill()
        p.wait()
    deadline = time.monotonic() + 30
    while _active(use_agent) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _active(use_agent) == []
