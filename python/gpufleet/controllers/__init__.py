"""The seeds' controller classes over gpufleet: DockerController (`gpufleet run --docker`),
DirectBenchmarkController (genai-bench with GPU monitoring around it) and OMEController (`gpufleet
cluster place --apply`). Importable from the seeds' module paths through python/examples/src."""

from .direct_benchmark_controller import DirectBenchmarkController
from .docker_controller import DockerController
from .ome_controller import OMEController

__all__ = ["DirectBenchmarkController", "DockerController", "OMEController"]
