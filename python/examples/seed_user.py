"""A seed user's program, unchanged: the imports and calls are those of the seeds' documentation
(gpu-resource-tracking.md and gpu-allocation-ome.md). Only src/utils/ changed: each module there is now
one line that re-exports gpufleet's. Point it at an agent with GPUFLEET_URL."""

from src.utils.gpu_monitor import get_gpu_monitor
from src.utils.gpu_scheduler import estimate_gpu_requirements
from src.utils.gpu_scheduler import check_gpu_availability
from src.utils.gpu_scheduler import wait_for_gpu_availability
from src.utils.gpu_discovery import (
    get_cluster_gpu_status,
    get_node_gpu_summaries,
    find_best_node_for_deployment
)

# Get the global GPU monitor instance
gpu_monitor = get_gpu_monitor()

# Check if nvidia-smi is available
if gpu_monitor.is_available():
    print("GPU monitoring available")

# Get current GPU snapshot (uses cache if recent)
snapshot = gpu_monitor.query_gpus()

# Force fresh query (bypass cache)
snapshot = gpu_monitor.query_gpus(use_cache=False)

# Access GPU data
for gpu in snapshot.gpus:
    print(f"GPU {gpu.index}: {gpu.name}")
    print(f"  Memory: {gpu.memory_used_mb}/{gpu.memory_total_mb} MB")
    print(f"  Utilization: {gpu.utilization_percent}%")
    print(f"  Temperature: {gpu.temperature_c}°C")
    print(f"  Power: {gpu.power_draw_w}W")

# Get GPUs with <50% utilization and at least 8GB free
available_gpus = gpu_monitor.get_available_gpus(
    min_memory_mb=8000,
    max_utilization=50
)

print(f"Available GPU indices: {available_gpus}")

# Start monitoring thread (samples every 1 second)
gpu_monitor.start_monitoring(interval_seconds=1.0)

# ... run your workload ...

# Stop monitoring and get aggregated stats
stats = gpu_monitor.stop_monitoring()

# Access aggregated data
print(f"Monitoring duration: {stats['monitoring_duration_seconds']}s")
print(f"Sample count: {stats['sample_count']}")

for gpu_index, gpu_stats in stats['gpu_stats'].items():
    print(f"\nGPU {gpu_index}:")
    print(f"  Utilization: {gpu_stats['utilization']['mean']:.1f}%")
    print(f"    Range: {gpu_stats['utilization']['min']:.0f}% - {gpu_stats['utilization']['max']:.0f}%")
    print(f"  Memory: {gpu_stats['memory_used_mb']['mean']:.0f} MB")
    print(f"  Temperature: {gpu_stats['temperature_c']['mean']:.0f}°C")
    print(f"  Power: {gpu_stats['power_draw_w']['mean']:.1f}W")

task_config = {
    "model": {"id_or_path": "llama-3-70b"},
    "parameters": {
        "tp-size": [1, 2, 4],      # Tensor parallelism
        "pp-size": [1],             # Pipeline parallelism
        "dp-size": [1]              # Data parallelism
    }
}

required_gpus, estimated_memory_mb = estimate_gpu_requirements(task_config)
print(f"Estimated requirements: {required_gpus} GPUs, {estimated_memory_mb} MB per GPU")

# Check if 4 GPUs with 10GB free are available
is_available, message = check_gpu_availability(
    required_gpus=4,
    min_memory_mb=10000
)

if is_available:
    print(f"GPUs available: {message}")
else:
    print(f"GPUs unavailable: {message}")

# Wait up to 5 minutes for GPUs to become available
is_available, message = wait_for_gpu_availability(
    required_gpus=2,
    min_memory_mb=10000,
    timeout_seconds=300,    # 5 minutes
    check_interval=30       # Check every 30 seconds
)

if is_available:
    print(f"GPUs became available: {message}")
else:
    print(f"Timeout: {message}")

# Get all GPU information
gpus = get_cluster_gpu_status()
for gpu in gpus:
    print(f"{gpu.node_name} GPU {gpu.gpu_index}: {gpu.utilization_percent}%")

# Get node summaries
summaries = get_node_gpu_summaries()
for node_name, summary in summaries.items():
    print(f"{node_name}: {summary.idle_gpu_count} idle GPUs")

# Find best node for deployment
best_node = find_best_node_for_deployment(required_gpus=2)
print(f"Best node: {best_node}")
