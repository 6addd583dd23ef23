#pragma once
// The one JSON codec of a GPU need (core::GpuNeed). Two documents carry it under different keys: the
// agent socket's acquire ("min_memory_mib", "max_utilization_pct": the canonical names) and the seeds'
// REST body of POST /api/v1/allocations and /api/v1/jobs ("min_memory_mb", "max_utilization": their
// spelling, kept on the wire; the value is MiB either way). One table of keys per document, one decoder
// and one encoder for both. Pure; safe on any input (types, ranges and the MIG profile are checked).
//
// A new criterion is one member of core::GpuNeed, one key in GpuNeedKeys (and its two spellings), and
// its lines in gpu_need_from_json / gpu_need_json.
#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/policy.hpp"
#include "core/result.hpp"

namespace gf::wire {

struct GpuNeedKeys {
  const char* gpus;
  const char* min_free_memory_mib;
  const char* max_utilization_pct;
  const char* allow_busy;
  const char* mig_profile;
  std::array<const char*, 5> all() const {
    return {gpus, min_free_memory_mib, max_utilization_pct, allow_busy, mig_profile};
  }
};
// The agent socket's acquire (docs/agent-socket.md).
inline constexpr GpuNeedKeys kAgentNeedKeys{"gpus", "min_memory_mib", "max_utilization_pct", "allow_busy", "mig"};
// The seeds' REST bodies.
inline constexpr GpuNeedKeys kSeedNeedKeys{"gpus", "min_memory_mb", "max_utilization", "allow_busy", "mig"};

// Whether key is one of the need's keys in this spelling (callers check the rest of their object).
bool is_gpu_need_key(std::string_view key, const GpuNeedKeys& keys = kAgentNeedKeys);

// The need in j (an object); absent keys keep core::GpuNeed's defaults. Invalid, naming the key, when a
// value has the wrong type or range: gpus 1 to 1024, memory 0 to 2^40 MiB, utilization 0 to 100,
// allow_busy a boolean, mig a profile as allocator::valid_mig_profile takes it.
Result<core::GpuNeed> gpu_need_from_json(const nlohmann::json& j, const GpuNeedKeys& keys = kAgentNeedKeys);
// Every member under its key; "mig" only when a profile is asked for.
nlohmann::json gpu_need_json(const core::GpuNeed& need, const GpuNeedKeys& keys = kAgentNeedKeys);

}  // namespace gf::wire
