"""No agent (the binary answers), no gpufleet at all, the fleet routes, and the seed user's script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpufleet

ROOT = Path(__file__).resolve().parents[1]


def _cli_leases():
    out = subprocess.run([os.environ["GPUFLEET_BIN"], "leases", "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["leases"]


def test_fallback_to_the_binary(no_agent):
    m = gpufleet.get_gpu_monitor()
    snap = m.query_gpus()
    assert snap is not None and [g.memory_used_mb for g in snap.gpus] == [1000, 40000, 80000]
    assert m.get_available_gpus(min_memory_mb=8000) == [0, 1]
    assert gpufleet.estimate_gpu_requirements(
        {"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [2]}})[0] == 2
    assert gpufleet.check_gpu_availability(2, 8000)[0]
    assert gpufleet.select_gpus_for_task(2) == [0, 1]


def test_fallback_lease_through_gpufleet_alloc(no_agent):
    with gpufleet.lease(gpus=1) as held:
        assert held.via == "binary" and held.indices == [0]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
        leases = _cli_leases()
        assert [lz["id"] for lz in leases] == [held.id]
        assert leases[0]["owner"]["pid"] == os.getpid()  # alloc ties it to its parent: this process
        assert gpufleet.get_gpu_monitor().get_available_gpus(min_memory_mb=8000) == [1]
        with pytest.raises(gpufleet.NoGpusAvailable):
            with gpufleet.lease(gpus=2):
                pass
    assert _cli_leases() == []
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_nothing_to_talk_to(no_agent, monkeypatch):
    monkeypatch.setenv("GPUFLEET_BIN", "/nonexistent/gpufleet")
    assert gpufleet.get_gpu_monitor().query_gpus() is None  # the seed's answer when nvidia-smi failed
    assert not gpufleet.get_gpu_monitor().is_available()
    with pytest.raises(gpufleet.AgentUnavailable):
        gpufleet.estimate_gpu_requirements({"parameters": {"tp-size": [1]}})
    with pytest.raises(gpufleet.AgentUnavailable):
        with gpufleet.lease(gpus=1):
            pass
    with pytest.raises(gpufleet.AgentUnavailable):
        gpufleet.get_node_gpu_summaries()


def test_cluster_routes_need_a_fleet_view(use_agent):
    with pytest.raises(gpufleet.ClusterNotConfigured, match="cluster-config"):
        gpufleet.get_cluster_gpu_status()
    with pytest.raises(gpufleet.ClusterNotConfigured):
        gpufleet.find_best_node_for_deployment(required_gpus=1)


def test_cluster_functions(cluster_agent, monkeypatch):
    monkeypatch.setenv("GPUFLEET_URL", cluster_agent.url)
    gpus = gpufleet.get_cluster_gpu_status()
    assert [(g.node_name, g.gpu_index, g.utilization_percent, g.is_idle) for g in gpus] == [
        ("node-a", 0, 10.0, True), ("node-a", 1, 30.0, False), ("node-a", 2, 90.0, False)]
    # the seed's thresholds are parameters: with utilization under 40 % idle, GPU 1 is idle too
    assert [g.is_idle for g in gpufleet.get_cluster_gpu_status(utilization_threshold=40.0)] == [True, True, False]
    summaries = gpufleet.get_node_gpu_summaries()
    assert list(summaries) == ["node-a"]
    assert (summaries["node-a"].total_gpus, summaries["node-a"].idle_gpu_count) == (3, 1)
    # the fake's GPUs are healthy: no GPU is left out for its health
    assert all(g.healthy and g.unhealthy is None for g in gpus)
    assert (summaries["node-a"].unhealthy_gpus, summaries["node-a"].unhealthy) == (0, None)
    assert gpufleet.find_best_node_for_deployment(required_gpus=1) == "node-a"
    # No node has 2 idle GPUs: the seed's rule 3 takes the least-loaded node that can hold 2 GPUs ...
    assert gpufleet.find_best_node_for_deployment(required_gpus=2) == "node-a"
    # ... the CLI's default leaves it to the Kubernetes scheduler ...
    assert gpufleet.find_best_node_for_deployment(required_gpus=2, fallback="none") is None
    # ... and a node without 4 GPUs takes no 4-GPU deployment under either rule.
    assert gpufleet.find_best_node_for_deployment(required_gpus=4) is None
    assert gpufleet.find_best_node_for_deployment(required_gpus=2, utilization_threshold=40.0,
                                                  fallback="none") == "node-a"
    with pytest.raises(ValueError):
        gpufleet.find_best_node_for_deployment(required_gpus=1, fallback="random")


def test_seed_user_script_runs_unchanged(cluster_agent):
    env = dict(os.environ, GPUFLEET_URL=cluster_agent.url, GPUFLEET_SOCKET="none", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "seed_user.py")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "GPU monitoring available" in out
    assert "  Memory: 40000/81920 MB" in out
    assert "Available GPU indices: [0, 1]" in out
    assert "Sample count: " in out and "  Utilization: 90.0%" in out
    assert "Estimated requirements: 4 GPUs, 20000 MB per GPU" in out  # the seed's own example
    assert "GPUs unavailable: " in out  # 4 GPUs are more than the node has
    assert "GPUs became available: " in out
    assert "node-a GPU 0: 10.0%" in out
    assert "node-a: 1 idle GPUs" in out
    assert "Best node: node-a" in out  # 2 idle GPUs on no node (GPU 1 is 30 % busy): the least-loaded one
