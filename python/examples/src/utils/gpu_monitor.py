# This project's old gpu_monitor.py, replaced by gpufleet's: the code that imports it stays as it was.
from gpufleet.gpu_monitor import *  # noqa: F401,F403
