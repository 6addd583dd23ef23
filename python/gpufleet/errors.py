"""The package's exceptions.

Each one also derives from the built-in exception a seed user's code already catches: the seed's
select_gpus_for_task raised RuntimeError when too few GPUs qualified, so NoGpusAvailable is one.
"""


class GpufleetError(Exception):
    """Base class of every error this package raises."""


class AgentUnavailable(GpufleetError, ConnectionError):
    """Neither the local agent nor the gpufleet binary could answer."""


class NoGpusAvailable(GpufleetError, RuntimeError):
    """Not enough GPUs qualify for the request (the seed raised RuntimeError here)."""


class Timeout(GpufleetError, TimeoutError):
    """A wait for GPUs ran out of time."""


class ClusterNotConfigured(GpufleetError):
    """The agent has no fleet view (it answers /api/v1/cluster/* with 404 or 503)."""
