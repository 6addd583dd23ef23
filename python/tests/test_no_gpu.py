"""A machine where no GPU can be read: the seed's API says so (is_available() False, query_gpus() None),
with or without an agent, while an explicitly chosen simulated backend still counts as GPUs."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import urllib.error
import urllib.request

import gpufleet


def _seed_benchmark(monitor) -> object:
    """The seed's benchmark: monitoring only where GPUs can be read, else gpu_monitoring is None."""
    gpu_monitoring = None
    if monitor.is_available():
        monitor.start_monitoring(interval_seconds=0.05)
        gpu_monitoring = monitor.stop_monitoring()
    return gpu_monitoring


def _health(url: str) -> dict:
    """GET /api/health, whatever its status (503 when degraded carries the same document)."""
    try:
        with urllib.request.urlopen(url + "/api/health", timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


def test_no_backend_and_no_agent_is_no_gpus(no_gpu, caplog):
    # The binary reports the empty machine as a fact (exit 0, "gpus": []), as documented ...
    out = subprocess.run([os.environ["GPUFLEET_BIN"], "status", "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["backend"] == "none" and doc["gpus"] == []
    # ... and the seed's API reads it as "GPUs cannot be read here".
    m = gpufleet.get_gpu_monitor()
    with caplog.at_level(logging.WARNING, logger="gpufleet.gpu_monitor"):
        assert m.query_gpus(use_cache=False) is None
    assert "no GPU backend is usable here" in caplog.text
    assert not m.is_available()
    assert m.get_gpu_info(0) is None
    assert m.get_available_gpus() == []
    assert _seed_benchmark(m) is None


def test_an_agent_without_gpus_is_no_gpus(make_agent, point_at):
    a = make_agent("bare", no_gpus=True)
    point_at(a)
    doc = a.get("/api/v1/monitoring/gpu-metrics")
    assert doc["gpus"] == [] and doc["message"]
    m = gpufleet.get_gpu_monitor()
    assert m.query_gpus(use_cache=False) is None
    assert not m.is_available()
    assert _seed_benchmark(m) is None
    # The seed's frontend check reads the same answer from the health document.
    assert _health(a.url)["gpu_monitoring"] == "unavailable"


def test_an_explicitly_simulated_node_counts_as_gpus(make_agent, point_at):
    a = make_agent("sim", ["--backend", "sim"], no_gpus=True)
    point_at(a)
    m = gpufleet.get_gpu_monitor()
    assert m.is_available()
    snap = m.query_gpus(use_cache=False)
    assert snap is not None and len(snap.gpus) == 4
    health = _health(a.url)
    assert health["gpu_monitoring"] == "available"
    assert health["monitoring"]["available"] is True and health["monitoring"]["gpu_count"] == 4
