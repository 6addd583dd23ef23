"""The seed's gpu_monitor API (GPUMonitor, GPUInfo, GPUSnapshot, get_gpu_monitor), answered by the
local gpufleet agent instead of parsing nvidia-smi, and by `gpufleet status --json` when no agent runs.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Set

from . import _transport as t
from ._policy import MAX_UTILIZATION_PCT
from .errors import AgentUnavailable, GpufleetError

log = logging.getLogger(__name__)

CACHE_TTL_SECONDS = 5.0  # the seed's


@dataclass
class GPUInfo:
    """One GPU, with the seed's fields. Memory is in MiB (what nvidia-smi's "MB" always was). A value
    the driver cannot give (no temperature sensor, no power reading) is None, never a made-up 0."""

    index: int
    name: str
    memory_total_mb: int
    memory_used_mb: int
    memory_free_mb: int
    utilization_percent: int
    temperature_c: Optional[int]
    power_draw_w: Optional[float]
    score: float = 0.0  # availability score, 0.0-1.0
    process_count: int = 0  # processes running on the GPU (gpufleet's own included)


@dataclass
class GPUSnapshot:
    """All GPUs at one moment."""

    timestamp: datetime
    gpus: List[GPUInfo] = field(default_factory=list)


def availability_score(memory_free_mb: float, memory_total_mb: float, utilization_percent: float) -> float:
    """The seed's composite score: 0.6 x free-memory fraction + 0.4 x idle fraction."""
    mem = memory_free_mb / memory_total_mb if memory_total_mb > 0 else 0.0
    return 0.6 * mem + 0.4 * (100.0 - utilization_percent) / 100.0


def _int(v: Any) -> Optional[int]:
    return None if v is None else int(round(float(v)))


def _parse_time(text: Any) -> datetime:
    if isinstance(text, str):
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(timezone.utc)


def gpu_from_doc(g: Dict[str, Any]) -> GPUInfo:
    """A GPUInfo from one GPU of the agent's gpu-metrics document (or `status --json`)."""
    mem = g.get("memory") or {}
    total = _int(mem.get("total")) or 0
    used = _int(mem.get("used")) or 0
    free = _int(mem.get("free"))
    if free is None:
        free = max(total - used, 0)
    util = _int(g.get("utilization")) or 0
    score = g.get("availability_score")
    power = g.get("power_usage")
    return GPUInfo(
        index=int(g["index"]),
        name=str(g.get("name") or ""),
        memory_total_mb=total,
        memory_used_mb=used,
        memory_free_mb=free,
        utilization_percent=util,
        temperature_c=_int(g.get("temperature")),
        power_draw_w=None if power is None else float(power),
        score=float(score) if score is not None else availability_score(free, total, util),
        process_count=len(g.get("processes") or []),
    )


def snapshot_from_doc(doc: Dict[str, Any]) -> GPUSnapshot:
    return GPUSnapshot(timestamp=_parse_time(doc.get("timestamp")),
                       gpus=[gpu_from_doc(g) for g in doc.get("gpus") or []])


def no_gpu_reason(doc: Dict[str, Any]) -> str:
    """Why a reading holds no GPU: the agent's message, else the first specific warning of
    `status --json` (which backend was tried and why it could not be used)."""
    if doc.get("message"):
        return str(doc["message"])
    backend = doc.get("backend")
    if backend and backend != "none":
        return f"the {backend} backend sees no GPUs"
    warnings = [str(w) for w in doc.get("warnings") or []]
    specific = [w for w in warnings if "no GPU backend" not in w]
    return "no GPU backend is usable here" + (f" ({specific[0]})" if specific else "")


def metrics_document() -> Dict[str, Any]:
    """The node's reading: GET /api/v1/monitoring/gpu-metrics, else `gpufleet status --json`."""
    try:
        status, doc = t.http_json("GET", "/api/v1/monitoring/gpu-metrics")
    except AgentUnavailable:
        _, doc, _ = t.run_binary(["status", "--json"])
        return doc
    if status != 200 or not isinstance(doc, dict):
        raise GpufleetError(f"the agent could not read the GPUs: {t.error_text(doc)}")
    return doc


def leased_indices() -> Set[int]:
    """GPUs held by a lease. Only needed without an agent: the agent's availability already knows."""
    try:
        _, doc, _ = t.run_binary(["leases", "--json"])
    except GpufleetError:
        return set()
    out: Set[int] = set()
    for lease in (doc or {}).get("leases", []):
        out.update(int(g["index"]) for g in lease.get("gpus", []))
    return out


class GPUMonitor:
    """The seed's monitor: cached queries, availability ranking and a sampling thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: Optional[GPUSnapshot] = None
        self._cache_time = 0.0
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._samples: List[GPUSnapshot] = []
        self._started_at = 0.0

    def is_available(self) -> bool:
        """True when GPUs can be read here (through the agent or the binary): at least one GPU. A
        node with no usable backend, or whose backend sees no GPU, is False, as the seed's guard
        `if monitor.is_available(): monitor.start_monitoring()` expects."""
        return self.query_gpus() is not None

    def query_gpus(self, use_cache: bool = True) -> Optional[GPUSnapshot]:
        """The GPUs now; a reading younger than 5 s is reused unless use_cache is False. None when
        no GPU can be read (the seed's answer when nvidia-smi failed): nothing answers, the query
        fails, or the reading holds no GPU. The cause is logged."""
        with self._lock:
            if use_cache and self._cache is not None and time.monotonic() - self._cache_time < CACHE_TTL_SECONDS:
                return self._cache
        try:
            doc = metrics_document()
        except GpufleetError as e:
            log.warning("GPU query failed: %s", e)
            return None
        # gpufleet answers a node without GPUs with an empty document (exit 0, or 200 with a message),
        # since for its own clients that is a fact, not an error; for the seed's API it is "no GPUs".
        if not isinstance(doc, dict):
            log.warning("GPU query failed: the reading is not a JSON object")
            return None
        if not doc.get("gpus"):
            log.warning("no GPU can be read here: %s", no_gpu_reason(doc))
            return None
        snap = snapshot_from_doc(doc)
        with self._lock:
            self._cache, self._cache_time = snap, time.monotonic()
        return snap

    def get_available_gpus(self, min_memory_mb: Optional[int] = None,
                           max_utilization: int = MAX_UTILIZATION_PCT, exclusive: bool = False) -> List[int]:
        """Indices of GPUs with at most max_utilization % utilization and at least min_memory_mb free,
        best availability score first. GPUs another job has leased from gpufleet are left out.

        That is the seed's rule: a GPU with a small resident process (an Xorg, an idle server) qualifies.
        exclusive=True also leaves out every GPU that runs a process gpufleet did not start."""
        try:
            status, doc = t.http_json("GET", t.query("/api/v1/availability", {
                "gpus": 1, "min_memory_mb": min_memory_mb or 0, "max_utilization": max_utilization,
                "exclusive": "true" if exclusive else "false"}))
        except AgentUnavailable:
            snap = self.query_gpus(use_cache=False)
            if snap is None:
                return []
            leased = leased_indices()
            ok = [g for g in snap.gpus if g.index not in leased and g.utilization_percent <= max_utilization
                  and (min_memory_mb is None or g.memory_free_mb >= min_memory_mb)
                  and not (exclusive and g.process_count > 0)]
            return [g.index for g in sorted(ok, key=lambda g: -g.score)]
        if status != 200:
            log.warning("GPU availability query failed: %s", t.error_text(doc))
            return []
        ok = [g for g in doc.get("gpus", []) if g.get("qualifies")]
        ok.sort(key=lambda g: -float(g.get("availability_score") or 0))
        return [int(g["index"]) for g in ok]

    def get_gpu_info(self, gpu_index: int) -> Optional[GPUInfo]:
        """One GPU by index, or None when the node has no such GPU (or it cannot be read)."""
        snap = self.query_gpus()
        if snap is None:
            return None
        return next((g for g in snap.gpus if g.index == gpu_index), None)

    def start_monitoring(self, interval_seconds: float = 1.0) -> None:
        """Starts sampling every interval_seconds in a background thread; earlier samples are dropped."""
        self.stop_monitoring()
        with self._lock:
            self._samples = []
            self._cache = None
            self._started_at = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, args=(float(interval_seconds), self._stop),
                                        name="gpufleet-monitor", daemon=True)
        self._thread.start()

    def _sample_loop(self, interval: float, stop: threading.Event) -> None:
        while not stop.is_set():
            snap = self.query_gpus(use_cache=False)
            if snap is not None:
                with self._lock:
                    self._samples.append(snap)
            stop.wait(interval)

    def stop_monitoring(self) -> Optional[Dict[str, Any]]:
        """Stops the sampling thread and returns the seed's statistics (duration, sample count, and per
        GPU min/max/mean of utilization, memory, temperature and power); None when none was running."""
        thread = self._thread
        if thread is None:
            return None
        self._stop.set()
        thread.join()
        self._thread = None
        with self._lock:
            samples, self._samples = self._samples, []
            duration = time.monotonic() - self._started_at
            self._cache = None
        return monitoring_stats(samples, duration)


def _agg(values: List[float]) -> Dict[str, float]:
    if not values:
        return {"min": None, "max": None, "mean": None}  # type: ignore[dict-item]
    return {"min": float(min(values)), "max": float(max(values)), "mean": round(sum(values) / len(values), 2)}


def monitoring_stats(samples: List[GPUSnapshot], duration_s: float) -> Dict[str, Any]:
    """The seed's aggregate of a monitoring run."""
    per_gpu: Dict[int, List[GPUInfo]] = {}
    for s in samples:
        for g in s.gpus:
            per_gpu.setdefault(g.index, []).append(g)
    stats: Dict[str, Any] = {}
    for idx in sorted(per_gpu):
        gs = per_gpu[idx]
        util = _agg([g.utilization_percent for g in gs])
        util["samples"] = len(gs)
        stats[str(idx)] = {
            "name": gs[-1].name,
            "utilization": util,
            "memory_used_mb": _agg([g.memory_used_mb for g in gs]),
            "memory_usage_percent": _agg([100.0 * g.memory_used_mb / g.memory_total_mb
                                          for g in gs if g.memory_total_mb > 0]),
            "temperature_c": _agg([g.temperature_c for g in gs if g.temperature_c is not None]),
            "power_draw_w": _agg([g.power_draw_w for g in gs if g.power_draw_w is not None]),
        }
    return {"monitoring_duration_seconds": round(duration_s, 2), "sample_count": len(samples), "gpu_stats": stats}


_monitor: Optional[GPUMonitor] = None
_monitor_lock = threading.Lock()


def get_gpu_monitor() -> GPUMonitor:
    """The process's one GPUMonitor (created on first use, thread-safe)."""
    global _monitor
    with _monitor_lock:
        if _monitor is None:
            _monitor = GPUMonitor()
        return _monitor
