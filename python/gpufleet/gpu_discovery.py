"""The seed's gpu_discovery API (cluster-wide GPUs, per-node summaries, the node for a deployment),
answered by the agent's fleet view: GET /api/v1/cluster/gpus, /nodes and /select. The agent must run
with --cluster-config; otherwise these raise ClusterNotConfigured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from . import _transport as t
from ._policy import IDLE_MEMORY_PCT, IDLE_UTILIZATION_PCT
from .errors import ClusterNotConfigured, GpufleetError


@dataclass
class ClusterGPU:
    """One GPU of the fleet, with the seed's names."""

    node_name: str
    gpu_index: int
    gpu_model: str
    memory_total_mb: Optional[float]
    memory_used_mb: Optional[float]
    memory_usage_percent: Optional[float]
    utilization_percent: Optional[float]
    temperature_c: Optional[float]
    power_w: Optional[float]
    is_idle: bool
    uuid: Optional[str] = None
    # False for a GPU that had a critical XID, failed a row remap or is lost; `unhealthy` says why
    # ("XID 79 (GPU has fallen off the bus)"). Never idle.
    healthy: bool = True
    unhealthy: Optional[str] = None


@dataclass
class NodeGPUSummary:
    """One node: its GPUs and how many are idle, with the seed's names."""

    node_name: str
    total_gpus: int
    allocatable_gpus: int
    free_gpus: int
    idle_gpu_count: int
    avg_utilization: Optional[float]
    avg_memory_usage: Optional[float]
    has_metrics: bool
    health: str
    gpu_model: Optional[str] = None
    # GPUs counted neither free nor idle because they are unhealthy, and why.
    unhealthy_gpus: int = 0
    unhealthy: Optional[str] = None


def _get(path: str, params: Dict[str, Any]) -> Dict[str, Any]:
    status, doc = t.http_json("GET", t.query(path, params))
    if status in (404, 503):
        raise ClusterNotConfigured(f"{t.agent_url()}{path}: {t.error_text(doc)}")
    if status != 200 or not isinstance(doc, dict):
        raise GpufleetError(f"{t.agent_url()}{path}: {t.error_text(doc)}")
    return doc


def get_cluster_gpu_status(utilization_threshold: float = IDLE_UTILIZATION_PCT,
                           memory_threshold: float = IDLE_MEMORY_PCT) -> List[ClusterGPU]:
    """Every GPU the fleet view knows, with metrics. A GPU is idle under both thresholds (%)."""
    doc = _get("/api/v1/cluster/gpus", {"utilization_threshold": utilization_threshold,
                                        "memory_threshold": memory_threshold})
    return [ClusterGPU(node_name=g["node"], gpu_index=int(g["index"]), gpu_model=g.get("model") or "",
                       memory_total_mb=g.get("memory_total_mib"), memory_used_mb=g.get("memory_used_mib"),
                       memory_usage_percent=g.get("memory_usage"), utilization_percent=g.get("utilization"),
                       temperature_c=g.get("temperature"), power_w=g.get("power_w"), is_idle=bool(g.get("idle")),
                       uuid=g.get("uuid"), healthy=g.get("healthy") is not False, unhealthy=g.get("unhealthy"))
            for g in doc.get("gpus", [])]


def get_node_gpu_summaries(utilization_threshold: float = IDLE_UTILIZATION_PCT,
                           memory_threshold: float = IDLE_MEMORY_PCT) -> Dict[str, NodeGPUSummary]:
    """Per node name, its GPU summary."""
    doc = _get("/api/v1/cluster/nodes", {"utilization_threshold": utilization_threshold,
                                         "memory_threshold": memory_threshold})
    out: Dict[str, NodeGPUSummary] = {}
    for n in doc.get("nodes", []):
        out[n["name"]] = NodeGPUSummary(
            node_name=n["name"], total_gpus=int(n.get("total_gpus") or 0),
            allocatable_gpus=int(n.get("allocatable_gpus") or 0), free_gpus=int(n.get("free_gpus") or 0),
            idle_gpu_count=int(n.get("idle_gpu_count") or 0), avg_utilization=n.get("avg_utilization"),
            avg_memory_usage=n.get("avg_memory_usage"), has_metrics=bool(n.get("has_metrics")),
            health=str(n.get("health") or ""), gpu_model=n.get("gpu_product"),
            unhealthy_gpus=int(n.get("unhealthy_gpus") or 0), unhealthy=n.get("unhealthy"))
    return out


def find_best_node_for_deployment(required_gpus: int = 1, utilization_threshold: float = IDLE_UTILIZATION_PCT,
                                  memory_threshold: float = IDLE_MEMORY_PCT,
                                  fallback: str = "least-loaded") -> Optional[str]:
    """The node to pin a deployment to, ranked as seed 002 ranks them: nodes with at least required_gpus
    idle GPUs first, most idle GPUs first; when none has enough, the node with the lowest average
    utilization that still has required_gpus GPUs no pod has requested (fallback="least-loaded", the
    seed's rule 3). fallback="none" is the CLI's default instead: None when no node has enough idle GPUs,
    and the Kubernetes scheduler decides. None also when no node can take the deployment at all."""
    if fallback not in ("least-loaded", "none"):
        raise ValueError(f"fallback must be 'least-loaded' or 'none', not {fallback!r}")
    doc = _get("/api/v1/cluster/select", {"gpus": required_gpus, "utilization_threshold": utilization_threshold,
                                          "memory_threshold": memory_threshold, "fallback": fallback})
    return doc.get("node")
