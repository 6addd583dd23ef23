#pragma once
// Placement of a MIG lease: one free MIG instance of a named profile ("1g.10gb"). Pure functions of a
// snapshot and the instances already leased; no I/O, safe from any thread. Sentences are for the user.
//
// An instance is free when it is not leased (by its MIG UUID) and, unless allow_busy, runs no process
// the driver attributes to it (by GPU- and compute-instance id) other than own_pids. A GPU that is
// lost or failing offers none of its instances. Among free instances the lowest GPU index, then the
// lowest MIG index, wins: instances of one profile are alike, and filling GPUs in order leaves whole
// GPUs' worth of instances together for later.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "allocator/select.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::allocator {

// A profile name as NVIDIA spells them: "1g.10gb", "1c.3g.40gb", "1g.10gb+me"; at most 32 characters of
// [0-9a-z.+]. Anything else is refused before it reaches an error message or the store.
bool valid_mig_profile(std::string_view profile) noexcept;

// The need's mig_profile and allow_busy decide (its GPU count is 1, its memory and utilization are the
// instance's profile's); the leased instances and our own processes are the caller's.
struct MigRequest {
  core::GpuNeed need;
  std::set<std::string> leased_uuids;  // MIG UUIDs held by active leases
  std::set<std::uint32_t> own_pids;
};

struct MigPick {
  unsigned gpu_index = 0;
  core::MigInstance instance;
  Selection selection;  // indices {gpu_index}, one "why", method "MIG instance"
};

// The instance to lease, or Unavailable saying which profile is missing ("no MIG instance of profile
// 2g.20gb on this node; its instances: 1g.10gb ×4 on GPU 0") or busy ("no free MIG instance of profile
// 1g.10gb: GPU 0 MIG-… (GI 9): leased; …").
Result<MigPick> select_mig_instance(const core::Snapshot& s, const MigRequest& r);

// Whether any GPU of the snapshot has an instance of `profile` at all (leased or not): a request for
// one that does not exist can never be met.
bool has_mig_profile(const core::Snapshot& s, std::string_view profile) noexcept;

// "1g.10gb ×4, 3g.40gb" of the node's instances, for messages; "none" when it has none.
std::string mig_profiles_text(const core::Snapshot& s);

}  // namespace gf::allocator
