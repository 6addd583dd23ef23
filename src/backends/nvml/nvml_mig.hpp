#pragma once
// Enumerating the MIG devices of a GPU in MIG mode through NVML's MIG device handles.
//
// A MIG device (a compute instance inside a GPU instance) has a handle of its own, distinct from its
// parent's: nvmlDeviceGetMigDeviceHandleByIndex(parent, i) for i below nvmlDeviceGetMaxMigDeviceCount,
// where an index with no device answers NOT_FOUND (indices may be sparse). On that handle the driver
// answers the instance's own UUID ("MIG-…"), name ("<GPU name> MIG 1g.10gb"), memory, and its GPU- and
// compute-instance ids.
//
// Cost per GPU and collection: 1 call for the handle of each index up to the maximum (7 on A100/H100),
// then 2 per present instance (UUID, memory); name and ids are read again only when the UUID at that
// index changed (an operator re-partitioned the GPU). Not thread-safe: one MigState per parent handle,
// used by one thread at a time (the backend's collection thread).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/nvml/nvml_api.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvml {

// More MIG devices than any GPU has (A100/H100: 7); bounds what a broken driver could make us keep.
inline constexpr unsigned kMaxMigDevices = 32;

// What we remember about one MIG index of a parent between collections.
struct MigSlot {
  std::string uuid;  // empty: nothing cached at this index
  std::string name;
  std::string profile;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
};

struct MigState {
  unsigned max_count = 0;  // 0 until read
  bool memory_v2_unsupported = false;
  bool memory_unsupported = false;
  std::vector<MigSlot> slots;  // by MIG index
};

// "1g.10gb" from "NVIDIA H100 80GB HBM3 MIG 1g.10gb" (the text after the last " MIG "); empty when the
// name has no such part. Bounded: at most 32 characters are kept.
std::string mig_profile_from_name(std::string_view name);

// Reads the MIG devices of `parent` into `out`, by index. Returns NVML's code for the parent as a
// whole: kSuccess (also when some instance could not be read: its readings are then absent with a
// reason, and `problems` says why), NOT_SUPPORTED when the driver has no MIG device handles for it,
// or the first GPU_IS_LOST / RESET_REQUIRED (the parent is gone). `out` is cleared first.
Return read_mig_devices(const Api& api, Device parent, MigState& state, std::vector<core::MigInstance>& out,
                        std::vector<std::string>& problems);

}  // namespace gf::backends::nvml
