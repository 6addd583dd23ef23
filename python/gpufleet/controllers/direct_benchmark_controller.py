"""The seed's DirectBenchmarkController: genai-bench against an inference endpoint, with the GPUs
monitored while it runs (gpufleet's monitor: the agent's samples, or the binary's), and the seed's
result with `gpu_monitoring` in it — None where no GPU can be read."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Optional

from ..gpu_monitor import get_gpu_monitor

log = logging.getLogger(__name__)

# Spec keys that are not genai-bench flags.
_RESERVED = {"timeout_seconds"}


def _bench_flags(spec: Dict[str, Any]) -> List[str]:
    """genai-bench's flags from a benchmark spec: `--key value` for each key (underscores become
    dashes, as its flags are spelled), a list repeats the flag (`--num-concurrency 1 --num-concurrency 4`),
    True is a bare flag, False and None are left out."""
    out: List[str] = []
    for key, value in spec.items():
        if key in _RESERVED or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        for v in value if isinstance(value, list) else [value]:
            out.append(flag)
            if v is not True:
                out.append(str(v))
    return out


class DirectBenchmarkController:
    """Runs genai-bench (`genai_bench`: the program, default `genai-bench` on PATH) with GPU monitoring
    around it. `monitor_interval` is the seed's 1 s."""

    def __init__(self, genai_bench: str = "genai-bench", verbose: bool = False, monitor_interval: float = 1.0,
                 timeout_seconds: float = 3600.0) -> None:
        self.genai_bench = genai_bench
        self.verbose = verbose
        self.monitor_interval = monitor_interval
        self.timeout_seconds = timeout_seconds

    def run_benchmark_job(self, endpoint_url: str, benchmark_spec: Dict[str, Any],
                          gpu_indices: Optional[List[int]] = None) -> Dict[str, Any]:
        """The seed's result: success, the benchmark's own results (the JSON files genai-bench wrote), and
        gpu_monitoring (the monitor's statistics while it ran; None where no GPU can be read).
        gpu_indices, when given, only names the GPUs in the log, as in the seed."""
        monitor = get_gpu_monitor()
        monitored = monitor.is_available()
        if monitored:
            monitor.start_monitoring(interval_seconds=self.monitor_interval)
            if gpu_indices is not None:
                log.info("Monitoring GPUs %s during the benchmark", gpu_indices)
        try:
            result = self._run_genai_bench(endpoint_url, benchmark_spec)
        finally:
            monitoring = monitor.stop_monitoring() if monitored else None
        result["gpu_monitoring"] = monitoring
        return result

    def _run_genai_bench(self, endpoint_url: str, spec: Dict[str, Any]) -> Dict[str, Any]:
        program = shutil.which(self.genai_bench) or (self.genai_bench if os.access(self.genai_bench, os.X_OK) else None)
        if program is None:
            return {"success": False, "error": f"{self.genai_bench} not found (pip install genai-bench)", "results": []}
        out_dir = tempfile.mkdtemp(prefix="gpufleet-bench-")
        args = [program, "benchmark", "--api-base", endpoint_url, *_bench_flags(spec),
                "--experiment-base-dir", out_dir]
        if self.verbose:
            log.info("Running %s", " ".join(args))
        try:
            p = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                               timeout=float(spec.get("timeout_seconds", self.timeout_seconds)))
        except subprocess.TimeoutExpired:
            return {"success": False, "error": "genai-bench timed out", "results": [], "output_dir": out_dir}
        results = []
        for path in sorted(glob.glob(os.path.join(out_dir, "**", "*.json"), recursive=True)):
            try:
                with open(path) as f:
                    results.append(json.load(f))
            except (OSError, ValueError) as e:
                log.warning("cannot read %s: %s", path, e)
        result: Dict[str, Any] = {"success": p.returncode == 0, "returncode": p.returncode, "results": results,
                                  "output_dir": out_dir}
        if p.returncode != 0:
            result["error"] = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return result
