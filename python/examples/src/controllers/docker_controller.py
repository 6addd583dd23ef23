# This project's old docker_controller.py, replaced by gpufleet's: the code that imports it stays as it was.
from gpufleet.controllers.docker_controller import *  # noqa: F401,F403
