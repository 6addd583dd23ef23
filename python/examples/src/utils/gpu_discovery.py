# This project's old gpu_discovery.py, replaced by gpufleet's: the code that imports it stays as it was.
from gpufleet.gpu_discovery import *  # noqa: F401,F403
