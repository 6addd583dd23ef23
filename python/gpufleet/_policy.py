"""The placement policy's defaults, as the agent applies them.

These mirror src/core/policy.hpp (kDefaultMinFreeMemoryMib, kDefaultMaxUtilizationPct: a GPU at exactly
the ceiling still qualifies) and allocator::IdleThresholds in src/allocator/node_rank.hpp (the fleet's
idle GPU: strictly below both). python/tests/test_policy.py fails when they differ from the defaults
the agent publishes in /api/openapi.json.
"""

# Free memory a GPU needs for a job unless the caller asks otherwise (MiB; the seeds say MB).
MIN_FREE_MEMORY_MB = 8000
# Highest utilization (%) at which a GPU still counts as available (inclusive).
MAX_UTILIZATION_PCT = 50
# The fleet view: a GPU is idle below this utilization (%) and below this memory use (% of capacity).
IDLE_UTILIZATION_PCT = 30.0
IDLE_MEMORY_PCT = 50.0
