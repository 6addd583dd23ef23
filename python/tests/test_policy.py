"""The package's policy defaults (gpufleet/_policy.py) are the agent's: the defaults the agent publishes
in its OpenAPI document come from src/core/policy.hpp and allocator::IdleThresholds, so a change on
either side without the other fails here."""

from __future__ import annotations

import inspect

from gpufleet import _policy, gpu_discovery, gpu_monitor, gpu_scheduler, leases


def _param(doc, path: str, method: str, name: str):
    for p in doc["paths"][path][method]["parameters"]:
        if "$ref" in p:
            p = doc["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]
        if p["name"] == name:
            return p["schema"]["default"]
    raise AssertionError(f"{method} {path} has no parameter {name}")


def test_defaults_are_the_agents(agent):
    doc = agent.get("/api/openapi.json")
    assert _param(doc, "/api/v1/availability", "get", "min_memory_mb") == _policy.MIN_FREE_MEMORY_MB
    assert _param(doc, "/api/v1/availability", "get", "max_utilization") == _policy.MAX_UTILIZATION_PCT
    body = doc["paths"]["/api/v1/allocations"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["min_memory_mb"]["default"] == _policy.MIN_FREE_MEMORY_MB
    assert body["properties"]["max_utilization"]["default"] == _policy.MAX_UTILIZATION_PCT
    assert _param(doc, "/api/v1/cluster/select", "get", "utilization_threshold") == _policy.IDLE_UTILIZATION_PCT
    assert _param(doc, "/api/v1/cluster/select", "get", "memory_threshold") == _policy.IDLE_MEMORY_PCT


def _default(fn, name: str):
    return inspect.signature(fn).parameters[name].default


def test_the_public_functions_take_their_defaults_from_the_policy():
    for fn in (leases.acquire, leases.lease):
        assert _default(fn, "min_memory_mb") == _policy.MIN_FREE_MEMORY_MB, fn
        assert _default(fn, "max_utilization") == _policy.MAX_UTILIZATION_PCT, fn
    assert _default(gpu_scheduler.select_gpus_for_task, "min_memory_mb") == _policy.MIN_FREE_MEMORY_MB
    assert _default(gpu_monitor.GPUMonitor.get_available_gpus, "max_utilization") == _policy.MAX_UTILIZATION_PCT
    for fn in (gpu_discovery.get_cluster_gpu_status, gpu_discovery.get_node_gpu_summaries,
               gpu_discovery.find_best_node_for_deployment):
        assert _default(fn, "utilization_threshold") == _policy.IDLE_UTILIZATION_PCT, fn
        assert _default(fn, "memory_threshold") == _policy.IDLE_MEMORY_PCT, fn
