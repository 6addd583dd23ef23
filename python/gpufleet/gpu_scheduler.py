"""The seed's gpu_scheduler API and its select_gpus_for_task, decided by the gpufleet agent: its
estimate (tp x pp x max(dp, cp, dcp), the model's weights), its availability (which knows the node's
leases), and its live updates to wake a waiting caller.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _transport as t
from ._policy import MAX_UTILIZATION_PCT, MIN_FREE_MEMORY_MB
from ._ws import WebSocket
from .errors import AgentUnavailable, GpufleetError, NoGpusAvailable
from .gpu_monitor import get_gpu_monitor

log = logging.getLogger(__name__)

# How often the agent pushes an update to a waiting caller (its /ws period). Each update triggers one
# availability check, so a release is seen within this time whatever check_interval says.
UPDATE_PERIOD_MS = 500


def estimate_gpu_requirements(task_config: Dict[str, Any], method: str = "seed") -> Tuple[int, int]:
    """(GPUs needed, memory per GPU in MiB) for a task, by the agent's estimator (POST
    /api/v1/estimate), else `gpufleet estimate --json`. Raises GpufleetError on a task the estimator
    rejects.

    method="seed" (the default) answers as the seed did: world size tp x pp x max(dp, cp, dcp) and the
    seed's table (70B/65B -> 20000, 13B/7B -> 12000, otherwise 8000 MiB per GPU), so tasks tuned to the
    seed's numbers keep them. method="weights" is gpufleet's estimate from the model's size (weights
    over tp x pp, plus a reserve): closer to what the model needs, and larger for big models at low tp.
    A parameter that looks like a parallel size but is none the estimator reads is logged at WARNING."""
    if method not in ("seed", "weights"):
        raise GpufleetError(f"estimate method {method!r}: expected 'seed' or 'weights'")
    try:
        status, doc = t.http_json("POST", t.query("/api/v1/estimate", {"method": method}), task_config)
    except AgentUnavailable:
        fd, path = tempfile.mkstemp(prefix="gpufleet-task-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(task_config, f)
            _, doc, _ = t.run_binary(["estimate", path, "--method", method, "--json"])
        finally:
            os.unlink(path)
        status = 200
    if status != 200 or not isinstance(doc, dict):
        raise GpufleetError(f"cannot estimate the task: {t.error_text(doc)}")
    for warning in doc.get("warnings") or []:
        log.warning("%s", warning)
    log.info("Estimated requirements: %s GPU(s), %s MB per GPU", doc["gpus"], doc["memory_mb_per_gpu"])
    return int(doc["gpus"]), int(doc["memory_mb_per_gpu"])


def _availability(required_gpus: int, min_memory_mb: Optional[int],
                  exclusive: bool) -> Tuple[bool, str, List[int]]:
    """(enough?, message, the indices gpufleet would choose)."""
    try:
        status, doc = t.http_json("GET", t.query("/api/v1/availability", {
            "gpus": required_gpus, "min_memory_mb": min_memory_mb or 0, "max_utilization": MAX_UTILIZATION_PCT,
            "exclusive": "true" if exclusive else "false"}))
    except AgentUnavailable:
        idx = get_gpu_monitor().get_available_gpus(min_memory_mb=min_memory_mb, exclusive=exclusive)
        if len(idx) >= required_gpus:
            return True, f"{len(idx)} GPU(s) available (need {required_gpus}): {idx}", idx[:required_gpus]
        return False, f"Insufficient GPUs: {len(idx)} available, {required_gpus} required", []
    if status != 200:
        return False, f"GPU availability check failed: {t.error_text(doc)}", []
    qualifying = [g for g in doc.get("gpus", []) if g.get("qualifies")]
    chosen = [int(i) for i in ((doc.get("would_choose") or {}).get("indices") or [])]
    if doc.get("available"):
        return True, (f"{len(qualifying)} GPU(s) available (need {required_gpus}), would use {chosen}"), chosen
    why = "; ".join(f"GPU {g['index']}: {g['reason']}" for g in doc.get("gpus", []) if not g.get("qualifies"))
    return False, (f"Insufficient GPUs: {len(qualifying)} available, {required_gpus} required"
                   + (f" ({why})" if why else "")), []


def check_gpu_availability(required_gpus: int, min_memory_mb: Optional[int] = None,
                           exclusive: bool = False) -> Tuple[bool, str]:
    """Whether required_gpus GPUs with min_memory_mb free each (and at most 50 % busy) are free now:
    (is_available, message). The message says which GPUs would be used, or why each one is not.

    The seed's rule by default: a GPU with a small resident process still qualifies. exclusive=True also
    refuses every GPU that runs a process gpufleet did not start."""
    ok, message, _ = _availability(required_gpus, min_memory_mb, exclusive)
    return ok, message


def wait_for_gpu_availability(required_gpus: int, min_memory_mb: Optional[int] = None,
                              timeout_seconds: int = 300, check_interval: int = 30,
                              exclusive: bool = False) -> Tuple[bool, str]:
    """Waits up to timeout_seconds for the GPUs: (is_available, message). exclusive as in
    check_gpu_availability.

    With an agent, the check is repeated on each of its live updates (the /ws WebSocket), so a GPU that
    is released is seen within a second, not at the next check_interval. Without one, it checks every
    check_interval seconds as the seed did."""
    deadline = time.monotonic() + timeout_seconds
    ok, message = check_gpu_availability(required_gpus, min_memory_mb, exclusive)
    if ok:
        return True, message
    log.info("Waiting for %d GPU(s): %s", required_gpus, message)
    ws: Optional[WebSocket] = None
    try:
        ws = WebSocket(t.agent_url() + f"/ws?period_ms={UPDATE_PERIOD_MS}", token=os.environ.get("GPUFLEET_TOKEN"))
    except AgentUnavailable as e:
        log.info("no live updates (%s): checking every %s s", e, check_interval)
    checks = 1
    last_log = time.monotonic()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if ws is not None:
                try:
                    ws.recv_json(timeout=min(left, max(float(check_interval), 1.0)))
                except (ConnectionError, OSError, ValueError) as e:
                    log.info("live updates ended (%s): checking every %s s", e, check_interval)
                    ws.close()
                    ws = None
            else:
                time.sleep(min(left, float(check_interval)))
            ok, message = check_gpu_availability(required_gpus, min_memory_mb, exclusive)
            checks += 1
            if ok:
                return True, message
            if time.monotonic() - last_log >= check_interval:  # the seed logged once per interval
                log.info("Still waiting for %d GPU(s) (check %d): %s", required_gpus, checks, message)
                last_log = time.monotonic()
    finally:
        if ws is not None:
            ws.close()
    return False, f"Insufficient GPUs after waiting {timeout_seconds}s: {message}"


def select_gpus_for_task(required_gpus: int, min_memory_mb: int = MIN_FREE_MEMORY_MB,
                         exclusive: bool = False) -> List[int]:
    """The best required_gpus GPUs for a task (availability score, GPU links when the agent knows the
    topology). Raises NoGpusAvailable, a RuntimeError as in the seed, when not enough qualify.
    exclusive as in check_gpu_availability.

    This only chooses; nothing stops another job taking the same GPUs. Use gpufleet.lease() to hold
    them."""
    ok, message, chosen = _availability(required_gpus, min_memory_mb, exclusive)
    if not ok or len(chosen) < required_gpus:
        raise NoGpusAvailable(message)
    return chosen[:required_gpus]
