# This project's old ome_controller.py, replaced by gpufleet's: the code that imports it stays as it was.
from gpufleet.controllers.ome_controller import *  # noqa: F401,F403
