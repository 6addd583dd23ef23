#include "backends/nvml/nvml_mig.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

namespace gf::backends::nvml {
namespace {

using core::Absent;
using core::Reading;

constexpr unsigned long long kBytesPerMiB = 1024ULL * 1024ULL;
constexpr std::size_t kMaxProfileLength = 32;

bool parent_gone(Return r) { return r == kErrorGpuIsLost || r == kErrorResetRequired; }

Absent reason_of(Return r) {
  switch (r) {
    case kErrorNotSupported:
    case kErrorFunctionNotFound: return Absent::NotSupported;
    case kErrorNoPermission: return Absent::NoPermission;
    case kErrorGpuIsLost: return Absent::GpuLost;
    default: return Absent::Error;
  }
}

Return read_text(FnDeviceString* fn, Device device, std::string& out) {
  if (fn == nullptr) return kErrorFunctionNotFound;
  char buffer[kDeviceStringLength] = {};
  const Return r = fn(device, buffer, sizeof buffer);
  if (r == kSuccess) out.assign(buffer, strnlen(buffer, sizeof buffer));
  return r;
}

struct Mib {
  std::uint64_t total = 0, used = 0, free = 0;
};

// The instance's memory: _v2 first (its `used` leaves out what the driver reserves), then v1.
Return read_memory(const Api& api, Device device, MigState& state, Mib& out) {
  Return r = kErrorNotSupported;
  if (api.memory_info_v2 != nullptr && !state.memory_v2_unsupported) {
    MemoryV2 m{};
    m.version = kMemoryV2Version;
    r = api.memory_info_v2(device, &m);
    if (r == kSuccess) {
      out = {m.total_bytes / kBytesPerMiB, m.used_bytes / kBytesPerMiB, m.free_bytes / kBytesPerMiB};
      return r;
    }
    if (r != kErrorNotSupported && r != kErrorFunctionNotFound && r != kErrorArgumentVersionMismatch) return r;
    state.memory_v2_unsupported = true;
  }
  if (api.memory_info == nullptr || state.memory_unsupported) return kErrorNotSupported;
  Memory m{};
  r = api.memory_info(device, &m);
  if (r == kSuccess) out = {m.total_bytes / kBytesPerMiB, m.used_bytes / kBytesPerMiB, m.free_bytes / kBytesPerMiB};
  if (r == kErrorNotSupported) state.memory_unsupported = true;
  return r;
}

}  // namespace

std::string mig_profile_from_name(std::string_view name) {
  const auto at = name.rfind(kMigNameMarker);
  if (at == std::string_view::npos) return {};
  std::string_view profile = name.substr(at + std::strlen(kMigNameMarker));
  while (!profile.empty() && profile.back() == ' ') profile.remove_suffix(1);
  if (profile.empty() || profile.find(' ') != std::string_view::npos) return {};
  return std::string(profile.substr(0, kMaxProfileLength));
}

Return read_mig_devices(const Api& api, Device parent, MigState& state, std::vector<core::MigInstance>& out,
                        std::vector<std::string>& problems) {
  out.clear();
  if (api.max_mig_devices == nullptr || api.mig_device_handle == nullptr) return kErrorFunctionNotFound;
  if (state.max_count == 0) {
    unsigned count = 0;
    const Return r = api.max_mig_devices(parent, &count);
    if (r != kSuccess) return r;
    state.max_count = std::min(count, kMaxMigDevices);
    state.slots.assign(state.max_count, MigSlot{});
  }
  for (unsigned i = 0; i < state.max_count; ++i) {
    MigSlot& slot = state.slots[i];
    Device mig = nullptr;
    Return r = api.mig_device_handle(parent, i, &mig);
    if (r == kErrorNotFound || r == kErrorInvalidArgument) {  // no MIG device at this index (now)
      slot = MigSlot{};
      continue;
    }
    if (parent_gone(r)) return r;
    if (r != kSuccess || mig == nullptr) {
      problems.push_back(fmt::format("MIG device {}: cannot get a handle: {}", i, describe(api, r)));
      continue;
    }

    std::string uuid;
    r = read_text(api.uuid, mig, uuid);
    if (parent_gone(r)) return r;
    if (r != kSuccess || uuid.empty()) {
      problems.push_back(fmt::format("MIG device {}: cannot read its UUID: {}", i, describe(api, r)));
      continue;
    }
    if (uuid != slot.uuid) {  // a new instance at this index: read what never changes for it once
      MigSlot fresh;
      fresh.uuid = uuid;
      r = read_text(api.name, mig, fresh.name);
      if (parent_gone(r)) return r;
      fresh.profile = mig_profile_from_name(fresh.name);
      // Without its ids an instance cannot be matched to its processes or to dcgm-exporter's GPU_I_ID:
      // leave it out (and say so) rather than show a made-up id; the next collection asks again.
      bool ids = true;
      for (auto [fn, id, what] :
           {std::tuple{api.gpu_instance_id, &fresh.gpu_instance_id, "GPU instance id"},
            std::tuple{api.compute_instance_id, &fresh.compute_instance_id, "compute instance id"}}) {
        r = fn != nullptr ? fn(mig, id) : kErrorFunctionNotFound;
        if (parent_gone(r)) return r;
        if (r != kSuccess && ids) {
          problems.push_back(fmt::format("MIG device {}: cannot read its {}: {}", i, what, describe(api, r)));
          ids = false;
        }
      }
      if (!ids) {
        slot = MigSlot{};
        continue;
      }
      slot = std::move(fresh);
    }

    core::MigInstance inst;
    inst.uuid = slot.uuid;
    inst.name = slot.name;
    inst.profile = slot.profile;
    inst.index = i;
    inst.gpu_instance_id = slot.gpu_instance_id;
    inst.compute_instance_id = slot.compute_instance_id;
    Mib mib;
    r = read_memory(api, mig, state, mib);
    if (parent_gone(r)) return r;
    if (r == kSuccess) {
      inst.memory_total_mib = mib.total;
      inst.memory_used_mib = mib.used;
      inst.memory_free_mib = mib.free;
    } else {
      const Absent why = reason_of(r);
      inst.memory_total_mib = inst.memory_used_mib = inst.memory_free_mib = Reading<std::uint64_t>::absent(why);
      if (why == Absent::Error)
        problems.push_back(fmt::format("MIG device {}: cannot read its memory: {}", i, describe(api, r)));
    }
    out.push_back(std::move(inst));
  }
  return kSuccess;
}

}  // namespace gf::backends::nvml
