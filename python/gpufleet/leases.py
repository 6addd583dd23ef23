"""`with gpufleet.lease(gpus=2) as lease:` — GPUs held for a block of code.

Through the agent socket the lease is tied to the connection: it belongs to this process's user (the
agent reads SO_PEERCRED) and ends when the block exits, or when the process dies, whichever comes
first. Without an agent the binary's `gpufleet alloc --json` takes it in the user's own store, tied to
its parent process (this Python process), and `gpufleet release` ends it on exit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional

from contextlib import contextmanager

from . import _transport as t
from ._policy import MAX_UTILIZATION_PCT, MIN_FREE_MEMORY_MB
from .errors import AgentUnavailable, GpufleetError, NoGpusAvailable, Timeout


@dataclass
class Lease:
    """GPUs held by this process."""

    id: str
    indices: List[int]
    cuda_visible_devices: str
    why: List[str] = field(default_factory=list)
    gpu_info: Optional[Dict[str, Any]] = None  # the seed's gpu_info record (agent socket only)
    via: str = "agent"  # "agent" (the socket) or "binary" (gpufleet alloc)
    released: bool = False
    _conn: Optional[t.AgentSocket] = None

    def release(self) -> None:
        """Ends the lease now (idempotent)."""
        if self.released:
            return
        self.released = True
        if self._conn is not None:
            try:
                r = self._conn.request("release", lease=self.id)
                if not r.get("ok"):
                    raise GpufleetError(f"releasing lease {self.id}: {t.error_text(r)}")
            finally:
                self._conn.close()  # ends a connection-tied lease even if the request failed
                self._conn = None
        else:
            t.run_binary(["release", self.id], parse=False)


def acquire(gpus: int = 1, min_memory_mb: int = MIN_FREE_MEMORY_MB, max_utilization: int = MAX_UTILIZATION_PCT,
            allow_busy: bool = False, name: Optional[str] = None, wait_seconds: float = 0) -> Lease:
    """Takes a lease and returns it; the caller must release() it. Prefer the lease() context manager.

    Raises NoGpusAvailable when not enough GPUs qualify now (wait_seconds 0), Timeout when they did not
    within wait_seconds, AgentUnavailable when neither the agent nor the binary can be reached."""
    path = t.socket_path()
    if path is None:
        return _acquire_binary(gpus, min_memory_mb, max_utilization, allow_busy, name, wait_seconds)
    conn = t.AgentSocket(path)
    try:
        args: Dict[str, Any] = {"gpus": gpus, "min_memory_mib": min_memory_mb, "max_utilization_pct": max_utilization,
                                "allow_busy": allow_busy, "wait_s": wait_seconds, "tie": "connection"}
        if name:
            args["name"] = name
        r = conn.request("acquire", **args)
        if not r.get("ok"):
            kind = (r.get("error") or {}).get("kind")
            msg = t.error_text(r)
            if kind == "unavailable":
                raise Timeout(msg) if wait_seconds > 0 else NoGpusAvailable(msg)
            raise GpufleetError(f"the agent refused the lease: {msg}")
    except BaseException:
        conn.close()
        raise
    lease = r["lease"]
    idx = [int(g["index"]) for g in lease.get("gpus", [])]
    return Lease(id=lease["id"], indices=idx, cuda_visible_devices=",".join(str(i) for i in idx),
                 why=list(r.get("why") or []), gpu_info=r.get("gpu_info"), via="agent", _conn=conn)


def _acquire_binary(gpus: int, min_memory_mb: int, max_utilization: int, allow_busy: bool,
                    name: Optional[str], wait_seconds: float) -> Lease:
    if wait_seconds > 0:
        raise GpufleetError("waiting for a lease needs the agent socket (gpufleet alloc takes GPUs now or never)")
    args = ["alloc", "--json", "--gpus", str(gpus), "--min-memory-mb", str(min_memory_mb),
            "--max-utilization", str(max_utilization)]
    if allow_busy:
        args.append("--allow-busy")
    if name:
        args += ["--name", name]
    code, doc, err = t.run_binary(args, ok_codes=(0, 75))
    if code == 75:
        raise NoGpusAvailable(err.strip() or f"not enough GPUs for {gpus}")
    idx = [int(g["index"]) for g in doc.get("gpus", [])]
    return Lease(id=doc["id"], indices=idx, cuda_visible_devices=",".join(str(i) for i in idx),
                 why=list(doc.get("why") or []), via="binary")


_ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@contextmanager
def lease(gpus: int = 1, min_memory_mb: int = MIN_FREE_MEMORY_MB, max_utilization: int = MAX_UTILIZATION_PCT,
          allow_busy: bool = False, name: Optional[str] = None, wait_seconds: float = 0) -> Iterator[Lease]:
    """Holds GPUs for the block: CUDA_VISIBLE_DEVICES names them (in PCI bus order, as nvidia-smi and
    gpufleet number them) inside; on exit, even by an exception, the environment is restored and the
    lease released."""
    held = acquire(gpus, min_memory_mb, max_utilization, allow_busy, name, wait_seconds)
    saved = {k: os.environ.get(k) for k in _ENV_KEYS}
    os.environ["CUDA_VISIBLE_DEVICES"] = held.cuda_visible_devices
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    try:
        yield held
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        held.release()


__all__ = ["Lease", "acquire", "lease"]
