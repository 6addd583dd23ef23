"""gpufleet for Python: the seed systems' GPU API (monitor, scheduler, discovery) and GPU leases,
answered by the local gpufleet agent (GPUFLEET_URL, the agent socket) or, without one, the gpufleet
binary. Standard library only.
"""

from .errors import AgentUnavailable, ClusterNotConfigured, GpufleetError, NoGpusAvailable, Timeout
from .gpu_discovery import (ClusterGPU, NodeGPUSummary, find_best_node_for_deployment, get_cluster_gpu_status,
                            get_node_gpu_summaries)
from .gpu_monitor import GPUInfo, GPUMonitor, GPUSnapshot, get_gpu_monitor
from .gpu_scheduler import (check_gpu_availability, estimate_gpu_requirements, select_gpus_for_task,
                            wait_for_gpu_availability)
from .leases import Lease, acquire, lease
from .controllers import DirectBenchmarkController, DockerController, OMEController

__version__ = "0.1.0"

__all__ = [
    "AgentUnavailable", "ClusterNotConfigured", "GpufleetError", "NoGpusAvailable", "Timeout",
    "ClusterGPU", "NodeGPUSummary", "find_best_node_for_deployment", "get_cluster_gpu_status",
    "get_node_gpu_summaries",
    "GPUInfo", "GPUMonitor", "GPUSnapshot", "get_gpu_monitor",
    "check_gpu_availability", "estimate_gpu_requirements", "select_gpus_for_task", "wait_for_gpu_availability",
    "Lease", "acquire", "lease",
    "DirectBenchmarkController", "DockerController", "OMEController",
]
