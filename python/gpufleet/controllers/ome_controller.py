"""The seed's OMEController over `gpufleet cluster place --apply`: the seed's InferenceService, named
`<task>-exp<id>`, asking for the parameters' world size in GPUs, pinned to the node gpufleet selects (none
with enable_gpu_selection=False, or when no node qualifies: then the Kubernetes scheduler decides, as in
the seed), and applied to the cluster with server-side apply."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

from .. import _transport as t
from ..errors import GpufleetError
from ..gpu_scheduler import estimate_gpu_requirements
from ._params import server_flags

log = logging.getLogger(__name__)


def inference_service(name: str, namespace: str, task_name: str, experiment_id: Any, model_name: str,
                      runtime_name: str, parameters: Dict[str, Any], gpus: int) -> Dict[str, Any]:
    """The seed's template (src/templates/inference_service.yaml.j2, without its node pin, which `cluster
    place` adds): one engine replica whose runner asks for `gpus` GPUs and runs with the parameters."""
    runner: Dict[str, Any] = {
        "name": "ome-container",
        "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
    }
    flags = server_flags(parameters)
    if flags:
        runner["args"] = flags
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"autotuner.io/task": task_name, "autotuner.io/experiment-id": str(experiment_id)}},
        "spec": {
            "model": {"name": model_name},
            "runtime": {"name": runtime_name},
            "engine": {"minReplicas": 1, "maxReplicas": 1, "runner": runner},
        },
    }


class OMEController:
    """kubeconfig_path / context: the cluster, as `gpufleet cluster` takes them (default: the usual
    search). cluster_args: more `gpufleet cluster` source options (e.g. ["--prometheus", URL])."""

    def __init__(self, kubeconfig_path: Optional[str] = None, context: Optional[str] = None, verbose: bool = False,
                 cluster_args: Optional[List[str]] = None) -> None:
        self.kubeconfig_path = kubeconfig_path
        self.context = context
        self.verbose = verbose
        self.cluster_args = list(cluster_args or [])

    def deploy_inference_service(self, task_name: str, experiment_id: Any, namespace: str, model_name: str,
                                 runtime_name: str, parameters: Dict[str, Any],
                                 enable_gpu_selection: bool = True) -> Optional[str]:
        """Applies the InferenceService; returns its name, or None when it could not be applied (logged).
        The node selection's report is printed as the seed printed it."""
        name = f"{task_name}-exp{experiment_id}"
        gpus, _ = estimate_gpu_requirements({"model": {"id_or_path": model_name}, "parameters": parameters})
        doc = inference_service(name, namespace, task_name, experiment_id, model_name, runtime_name, parameters, gpus)
        binary = t.binary()
        if binary is None:
            raise GpufleetError("no gpufleet binary found (set GPUFLEET_BIN, or put gpufleet on PATH)")
        fd, path = tempfile.mkstemp(prefix=f"gpufleet-{name}-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f)
            args = [binary, "cluster", "place", "-f", path, "--apply", "--gpus", str(gpus)]
            if not enable_gpu_selection:
                args.append("--no-gpu-selection")
            if self.kubeconfig_path:
                args += ["--kubeconfig", self.kubeconfig_path]
            if self.context:
                args += ["--context", self.context]
            args += self.cluster_args
            p = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        finally:
            os.unlink(path)
        # The selection's report, then "Created InferenceService 'NAME' in namespace 'NS' on node 'NODE'".
        report = p.stderr.strip()
        if report:
            print(report, file=sys.stdout if p.returncode == 0 else sys.stderr)
        if p.stdout.strip():
            print(p.stdout.strip())
        if p.returncode != 0:
            log.error("cannot deploy %s: %s", name, (report.splitlines() or [f"exit status {p.returncode}"])[-1])
            return None
        return name
