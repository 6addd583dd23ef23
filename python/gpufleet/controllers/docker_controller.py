"""The seed's DockerController over `gpufleet run --docker`: a served model in a container on GPUs
gpufleet chose and leased, named by one DeviceRequest (never CUDA_VISIBLE_DEVICES), stopped and removed
when the service is deleted.

Each deployment is one `gpufleet run --docker` process: it waits for the GPUs in the node's queue, holds
their lease for as long as the container runs, records the run (`gpufleet jobs`), and on SIGTERM stops and
removes the container and releases the lease. Nothing here talks to Docker itself.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .. import _transport as t
from ..errors import GpufleetError
from ..gpu_scheduler import estimate_gpu_requirements, select_gpus_for_task
from ._params import server_flags

log = logging.getLogger(__name__)

# The serving images of the seeds' runtimes, and the command each takes (the model at /model).
RUNTIMES: Dict[str, Dict[str, Any]] = {
    "sglang": {"image": "lmsysorg/sglang:latest",
               "command": ["python3", "-m", "sglang.launch_server", "--model-path", "/model", "--host", "0.0.0.0"],
               "port_flag": "--port"},
    "vllm": {"image": "vllm/vllm-openai:latest",
             "command": ["--model", "/model", "--host", "0.0.0.0"],  # the image's entrypoint is the server
             "port_flag": "--port"},
}
CONTAINER_PORT = 8000


@dataclass
class _Service:
    name: str
    proc: subprocess.Popen
    port: int
    gpus: int
    log_path: str
    lines: List[str] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DockerController:
    """The seeds' controller interface over `gpufleet run --docker`.

    docker_model_path: the host directory holding the models; model_name is a directory in it, mounted
    read-only at /model. wait_seconds: how long a deployment may wait in the node's queue for its GPUs."""

    def __init__(self, docker_model_path: str = "/mnt/data/models", verbose: bool = False,
                 wait_seconds: float = 300.0, images: Optional[Dict[str, str]] = None) -> None:
        self.docker_model_path = docker_model_path
        self.verbose = verbose
        self.wait_seconds = float(wait_seconds)
        self.images = dict(images or {})
        self._services: Dict[str, _Service] = {}
        self._lock = threading.Lock()

    def select_gpus_for_task(self, required_gpus: int, min_memory_mb: int = 8000) -> List[int]:
        """The seed's method: the best required_gpus GPUs now (RuntimeError when not enough qualify)."""
        return select_gpus_for_task(required_gpus, min_memory_mb)

    def deploy_inference_service(self, task_name: str, experiment_id: Any, namespace: str, model_name: str,
                                 runtime_name: str, parameters: Dict[str, Any],
                                 image: Optional[str] = None) -> Optional[str]:
        """Starts the model's server in a container on as many GPUs as the parameters' world size needs
        (tp x pp x max(dp, cp, dcp), every alias) with the seed's memory estimate free on each, once the
        node's queue grants them. Returns the service's name, `<task>-exp<id>`, or None when it could not
        start (no GPUs within wait_seconds, an unknown runtime, the engine's error: logged)."""
        name = f"{task_name}-exp{experiment_id}"
        runtime = RUNTIMES.get(runtime_name.lower()) if runtime_name else None
        image = image or self.images.get(runtime_name) or (runtime or {}).get("image")
        if image is None:
            log.error("runtime %r has no image (known: %s; pass image=)", runtime_name, ", ".join(RUNTIMES))
            return None
        binary = t.binary()
        if binary is None:
            raise GpufleetError("no gpufleet binary found (set GPUFLEET_BIN, or put gpufleet on PATH)")
        gpus, memory_mb = estimate_gpu_requirements({"model": {"id_or_path": model_name}, "parameters": parameters})
        with self._lock:
            if name in self._services and self._services[name].proc.poll() is None:
                log.error("service %s is already deployed", name)
                return None
        port = _free_port()
        command = list((runtime or {}).get("command", [])) + [(runtime or {}).get("port_flag", "--port"),
                                                               str(CONTAINER_PORT)] + server_flags(parameters)
        model_dir = os.path.join(self.docker_model_path, model_name)
        args = [binary, "run", "--gpus", str(gpus), "--min-memory-mb", str(memory_mb), "--wait", str(self.wait_seconds),
                "--name", name, "--docker", image, "--volume", f"{model_dir}:/model:ro",
                "--publish", f"127.0.0.1:{port}:{CONTAINER_PORT}", "--", *command]
        fd, log_path = tempfile.mkstemp(prefix=f"gpufleet-{name}-", suffix=".log")
        with os.fdopen(fd, "w"):
            pass
        out = open(log_path, "ab")
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as e:
            out.close()
            log.error("cannot start %s: %s", binary, e)
            return None
        out.close()
        service = _Service(name, proc, port, gpus, log_path)
        # Started when gpufleet says which GPUs it got ("job … on GPU …"); not when it exits first.
        deadline = time.monotonic() + self.wait_seconds + 30
        while time.monotonic() < deadline:
            text = self._log_text(service)
            if " on GPU " in text:
                break
            if proc.poll() is not None:
                log.error("service %s did not start: %s", name, text.strip().splitlines()[-1:] or proc.returncode)
                return None
            time.sleep(0.05)
        else:
            self._stop(service)
            log.error("service %s: no GPUs within %.0f s", name, self.wait_seconds)
            return None
        with self._lock:
            self._services[name] = service
        if self.verbose:
            log.info("Started %s on %d GPU(s), serving at %s", name, gpus, self.get_service_url(name, namespace))
        return name

    def get_service_url(self, service_name: str, namespace: Optional[str] = None) -> Optional[str]:
        """Where the service answers (the published port on 127.0.0.1); None when it is not deployed."""
        with self._lock:
            s = self._services.get(service_name)
        return None if s is None else f"http://127.0.0.1:{s.port}"

    def wait_for_ready(self, service_name: str, namespace: Optional[str] = None, timeout: float = 600.0) -> bool:
        """True once the server answers GET /health (or /v1/models) on its port; False at the timeout or
        when its container ended."""
        import urllib.request
        url = self.get_service_url(service_name, namespace)
        if url is None:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                s = self._services.get(service_name)
            if s is None or s.proc.poll() is not None:
                return False
            for path in ("/health", "/v1/models"):
                try:
                    with urllib.request.urlopen(url + path, timeout=2) as r:
                        if r.status == 200:
                            return True
                except OSError:
                    pass
            time.sleep(1.0)
        return False

    def delete_inference_service(self, service_name: str, namespace: Optional[str] = None) -> bool:
        """Stops and removes the service's container and releases its GPUs. False when there is none."""
        with self._lock:
            s = self._services.pop(service_name, None)
        if s is None:
            return False
        self._stop(s)
        if self.verbose:
            log.info("Deleted %s", service_name)
        return True

    @staticmethod
    def _log_text(s: _Service) -> str:
        try:
            with open(s.log_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @staticmethod
    def _stop(s: _Service) -> None:
        # `gpufleet run` stops and removes the container on SIGTERM, then releases the lease and records the run.
        if s.proc.poll() is None:
            s.proc.send_signal(signal.SIGTERM)
            try:
                s.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(s.proc.pid, signal.SIGKILL)
                s.proc.wait()
        try:
            os.unlink(s.log_path)
        except OSError:
            pass
