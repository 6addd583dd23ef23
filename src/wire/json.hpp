#pragma once
// JSON documents gpufleet prints and (later) serves. Pure encoders: no I/O, locale-independent.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/ports/lease_store.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "core/stats.hpp"
#include "wire/time.hpp"  // iso8601, which the documents write their times with

namespace gf::wire {

// The document of `gpufleet status --json` and GET /api/v1/monitoring/gpu-metrics:
// {"timestamp","backend","simulated","driver_version","cuda_driver_version","warnings",
//  "process_visibility", "gpus":[{"id":"gpu-0","index",...,"processes":[...]}]}. Absent readings are null.
// Each GPU's metrics are the rows of core::kFields, at their json_key; for every one that is null,
// "missing_reasons" maps that json_key ("memory.used") to the reason's code (one of core::kAbsentReasons:
// "not_supported", "no_permission", "gpu_lost", …); {} when none is.
nlohmann::json snapshot_json(const core::Snapshot& s);

// v rounded to `decimals` places (0–9; more are rounded to 9; 0 or fewer: a whole number) as JSON
// documents write it.
double round_to(double v, int decimals);

// GET /api/v1/fields and `gpufleet fields --json`: the field table, for clients that list metrics —
// {"fields": [{"key": "memory.used", "label", "unit" (null when unitless), "description",
//   "prometheus": {"name", "type"}, "history_metric" (null when the history keeps none)}, …],
//  "missing_reasons": {"not_supported": "not supported", …}} (every row of core::kAbsentReasons).
nlohmann::json fields_json();

// One GPU of that document. Besides the fields: "healthy" (core::judge_health), "health_problems" and
// "health_notes" ([{code, message}]: what makes it unhealthy; XIDs that keep it healthy), and
// "recent_xids" ([{xid, time}], oldest first, as the backend kept them).
nlohmann::json gpu_json(const core::GpuReading& g);

// The document of `gpufleet ps --json`: every GPU process, biggest memory first (unknown last).
nlohmann::json processes_json(const core::Snapshot& s);

// The sampler's statistics in the seed's shape: {"monitoring_duration_seconds","sample_count",
// "gpu_stats":{"<index>":{name, utilization{min,max,mean,p50,p95,samples}, memory_used_mb{…},
// memory_usage_percent{…}, temperature_c{…}, power_draw_w{…}, energy_joules, energy_source,
// sample_count}}, "series": {"<index>": {"t": [...], "utilization": [...], ...}}}.
nlohmann::json run_report_json(const core::RunReport& r, bool with_series = true);

// A lease's owner: {pid, user, uid}; uid is null for a row written without the agent.
nlohmann::json owner_json(const core::LeaseOwner& o);
// A lease: {id, job_id, name, gpus: [{index, uuid}], owner, tie ("connection", "process" or null),
// created_at, released_at, release_reason}.
nlohmann::json lease_json(const core::Lease& l);

// Their decoders (the agent client reads the socket's replies with them): exact for what the encoders
// write, a default for a field of the wrong type, never an exception.
// A time as the documents write it (ISO 8601 UTC, wire/time.hpp) or epoch milliseconds; nullopt otherwise.
std::optional<std::int64_t> ms_time_from_json(const nlohmann::json& v);
// lease_json back; an error when it is not an object with a string "id".
Result<core::Lease> lease_from_json(const nlohmann::json& j);
// owner_json back (a missing or odd field keeps its default).
core::LeaseOwner owner_from_json(const nlohmann::json& j);

}  // namespace gf::wire
