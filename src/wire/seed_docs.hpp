#pragma once
// The documents of the routes kept for the seeds' clients (the fleet manager's /api/v1/monitoring/*,
// the home monitor's /api/gpu/* and /api/health additions) and their error shapes, which those clients
// test for by key. Pure: the handlers gather the facts and send what these return.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/snapshot.hpp"

namespace gf::wire {

// The fleet manager's timestamp: "2025-03-04T23:02:50.123456", UTC with no zone suffix (Python's
// datetime.fromisoformat reads it on every version; a "Z" it reads only from 3.11).
std::string seed_timestamp(std::chrono::system_clock::time_point t);

// GET /api/v1/monitoring/health: {"status": "healthy", "timestamp", "version"}.
nlohmann::json monitoring_health_json(const std::string& version, std::chrono::system_clock::time_point now);

// What GET /api/v1/monitoring/metrics reports, gathered by the handler (nullopt: could not be read).
struct HostMetrics {
  std::optional<double> cpu_percent;
  double cpu_interval_s = 0;
  unsigned cpu_count = 0;
  std::optional<std::uint64_t> memory_total, memory_available, memory_free;  // bytes
  std::string disk_path;
  std::optional<std::uint64_t> disk_total, disk_used, disk_free;  // bytes
  std::string disk_error;                                         // empty: none
};
// The seed's {"timestamp", "system": {"cpu_percent", "memory": {"total", "available", "percent"},
// "disk": {"total", "used", "free", "percent"}}}, memory and disk inside "system", with gpufleet's
// extras beside the seed's keys: system.cpu_count and cpu_interval_s, memory.used and free, disk.path
// and error. Sizes in bytes (as psutil reports them), percents to one decimal, null when unknown.
nlohmann::json host_metrics_json(const HostMetrics& h, std::chrono::system_clock::time_point now);

// The fleet manager's error: {"detail": "Failed to get <what>: <cause>"} (sent with 500).
nlohmann::json seed_detail_error(const std::string& what, const std::string& cause);
// The home monitor's errors, exactly as its clients test for them.
nlohmann::json home_summary_error();  // {"error": "Failed to get GPU information", "gpu_count": 0, ...}
nlohmann::json home_metrics_error();  // {"error": "Failed to get GPU metrics", "gpus": []}
// GET /api/gpu/processes in the same style: {"error": "Failed to get GPU processes", "processes": []}.
nlohmann::json home_processes_error();

// What GET /api/health says of GPU monitoring: the home monitor's one word, and gpufleet's detail.
struct GpuMonitoring {
  bool available = false;     // a backend, a reading that is not stale, and the last collection succeeded
  std::size_t gpu_count = 0;  // of that reading; 0 when not available
  std::string last_error;     // empty: none
  std::string backend;
  bool stale = false;
  std::optional<double> age_s;  // nullopt: no reading yet
};
// {"available", "gpu_count", "last_error" (null when none), "backend", "stale", "age_s"}.
nlohmann::json gpu_monitoring_json(const GpuMonitoring& g);
// Adds the home monitor's keys to the health document: "service": "gpufleet", "database":
// "connected" | "unavailable" (the store), "gpu_monitoring": "available" | "unavailable" (a string, as
// the seed's frontend compares it), and gpufleet's detail object as "monitoring" (gpu_monitoring_json).
// The document's own "status" and "version" are left as they are.
void add_seed_health(nlohmann::json& health, const GpuMonitoring& g, bool store_ok);

// The sentence for a node whose backend works but shows no GPU (or has no backend): 200 with this
// "message", never an error.
std::string no_gpu_message(const core::Snapshot& s);

// GET /api/gpu/processes, the home monitor's "why is my GPU fan running?": {"timestamp", "node",
// "explanation" (one sentence), "gpu_count", "process_count", "counts": {"compute", "graphics",
// "compute+graphics", "mps"}, "processes": [process_json with gpu_index and gpu_uuid, biggest memory
// first], "gpus": [{index, name, utilization, temperature, fan_speed, power_draw, persistence_mode,
// idle}]}. The process text must already be capped and made printable by the caller.
nlohmann::json gpu_processes_json(const core::Snapshot& s, const std::string& node);
// The sentence alone: the processes using the GPUs (the biggest `top` by memory with user, command,
// GPU and memory, the rest counted) or, when none do, what else keeps a fan turning.
std::string fan_explanation(const core::Snapshot& s, std::size_t top = 3);

// gpufleet's own snapshot documents: "stale" (the reading is older than two collection intervals)
// and "age_s" (its age, to the millisecond), set on every answer so a client need not test for absence.
void mark_freshness(nlohmann::json& doc, bool stale, double age_s);

}  // namespace gf::wire
