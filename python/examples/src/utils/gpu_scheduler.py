# This project's old gpu_scheduler.py, replaced by gpufleet's: the code that imports it stays as it was.
from gpufleet.gpu_scheduler import *  # noqa: F401,F403
