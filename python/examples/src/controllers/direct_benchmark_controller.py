# This project's old direct_benchmark_controller.py, replaced by gpufleet's: the code that imports it stays as it was.
from gpufleet.controllers.direct_benchmark_controller import *  # noqa: F401,F403
