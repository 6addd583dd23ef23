"""`with gpufleet.lease(gpus=2) as lease:` — GPUs held for a block of code.

`lease(mig="1g.10gb")` holds one free MIG instance of that profile instead: CUDA_VISIBLE_DEVICES is then
its MIG UUID ("MIG-…"), and `lease.mig_uuids` lists it.

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
    indices: List[int]  # for a MIG lease: the index of the instance's GPU
    cuda_visible_devices: str
    mig_uuids: List[str] = field(default_factory=list)  # the MIG instances held ("MIG-…"); empty: whole GPUs
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


def _visible(gpus: List[Dict[str, Any]]) -> tuple:
    """(indices, CUDA_VISIBLE_DEVICES, MIG UUIDs) of a lease's GPUs: a MIG instance by its MIG UUID."""
    idx = [int(g["index"]) for g in gpus]
    migs = [str(g["uuid"]) for g in gpus if str(g.get("uuid", "")).startswith("MIG-")]
    names = [str(g["uuid"]) if str(g.get("uuid", "")).startswith("MIG-") else str(g["index"]) for g in gpus]
    return idx, ",".join(names), migs


def _check_mig(mig: Optional[str], gpus: int) -> None:
    if mig is None:
        return
    if not (isinstance(mig, str) and 0 < len(mig) <= 32 and all(c.isdigit() or "a" <= c <= "z" or c in ".+" for c in mig)):
        raise ValueError("mig must be a MIG profile such as '1g.10gb'")
    if gpus != 1:
        raise ValueError("a MIG lease is one instance: leave gpus at 1 with mig")


def acquire(gpus: int = 1, min_memory_mb: int = MIN_FREE_MEMORY_MB, max_utilization: int = MAX_UTILIZATION_PCT,
            allow_busy: bool = False, name: Optional[str] = None, wait_seconds: float = 0,
            mig: Optional[str] = None) -> Lease:
    """Takes a lease and returns it; the caller must release() it. Prefer the lease() context manager.
    With mig (a profile such as "1g.10gb"), one free MIG instance of that profile instead of whole GPUs.

    Raises NoGpusAvailable when not enough GPUs qualify now (wait_seconds 0), Timeout when they did not
    within wait_seconds, AgentUnavailable when neither the agent nor the binary can be reached."""
    _check_mig(mig, gpus)
    path = t.socket_path()
    if path is None:
        return _acquire_binary(gpus, min_memory_mb, max_utilization, allow_busy, name, wait_seconds, mig)
    conn = t.AgentSocket(path)
    try:
        args: Dict[str, Any] = {"gpus": gpus, "min_memory_mib": min_memory_mb, "max_utilization_pct": max_utilization,
                                "allow_busy": allow_busy, "wait_s": wait_seconds, "tie": "connection"}
        if name:
            args["name"] = name
        if mig:
            args["mig"] = mig
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
    idx, visible, migs = _visible(lease.get("gpus", []))
    return Lease(id=lease["id"], indices=idx, cuda_visible_devices=visible, mig_uuids=migs,
                 why=list(r.get("why") or []), gpu_info=r.get("gpu_info"), via="agent", _conn=conn)


def _acquire_binary(gpus: int, min_memory_mb: int, max_utilization: int, allow_busy: bool,
                    name: Optional[str], wait_seconds: float, mig: Optional[str] = None) -> Lease:
    if wait_seconds > 0:
        raise GpufleetError("waiting for a lease needs the agent socket (gpufleet alloc takes GPUs now or never)")
    args = ["alloc", "--json", "--gpus", str(gpus), "--min-memory-mb", str(min_memory_mb),
            "--max-utilization", str(max_utilization)]
    if allow_busy:
        args.append("--allow-busy")
    if name:
        args += ["--name", name]
    if mig:
        args += ["--mig", mig]
    code, doc, err = t.run_binary(args, ok_codes=(0, 75))
    if code == 75:
        raise NoGpusAvailable(err.strip() or f"not enough GPUs for {gpus}")
    idx, visible, migs = _visible(doc.get("gpus", []))
    return Lease(id=doc["id"], indices=idx, cuda_visible_devices=visible, mig_uuids=migs,
                 why=list(doc.get("why") or []), via="binary")


_ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


@contextmanager
def lease(gpus: int = 1, min_memory_mb: int = MIN_FREE_MEMORY_MB, max_utilization: int = MAX_UTILIZATION_PCT,
          allow_busy: bool = False, name: Optional[str] = None, wait_seconds: float = 0,
          mig: Optional[str] = None) -> Iterator[Lease]:
    """Holds GPUs for the block: CUDA_VISIBLE_DEVICES names them (in PCI bus order, as nvidia-smi and
    gpufleet number them) inside; on exit, even by an exception, the environment is restored and the
    lease released."""
    held = acquire(gpus, min_memory_mb, max_utilization, allow_busy, name, wait_seconds, mig)
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
