#include "backends/nvml/nvml_device.hpp"

#include "core/fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace gf::backends::nvml {
namespace {

using core::Absent;
using core::Reading;

constexpr unsigned long long kBytesPerMiB = 1024ULL * 1024ULL;
// INSUFFICIENT_SIZE can repeat when processes start between two calls; give up after a few rounds
// rather than loop on a GPU whose process list keeps growing.
constexpr int kProcessListAttempts = 4;
// Extra entries beyond the count NVML asked for, for processes that start before the retry.
constexpr unsigned kProcessHeadroom = 8;

constexpr unsigned bit(Query q) { return static_cast<unsigned>(q); }

template <class U, class T, class F>
Reading<U> convert(const Reading<T>& r, F&& f) {
  if (!r) return Reading<U>::absent(r.why());
  return Reading<U>(f(*r));
}

std::optional<std::uint64_t> bytes_to_mib(unsigned long long bytes) {
  if (bytes == kValueNotAvailable) return std::nullopt;  // never report 16 EiB
  return bytes / kBytesPerMiB;
}

// Asks one device its questions. Remembers NOT_SUPPORTED answers in the DeviceState, and stops at
// the first answer that says the GPU itself is gone (every later ask returns absent at once).
class Asker {
 public:
  explicit Asker(DeviceState& state) : state_(state) {}

  // `call(T& out)` makes the NVML call for `q` and returns its code; `available` is false when the
  // driver lacks the symbol.
  template <class T, class Call>
  Reading<T> ask(Query q, bool available, Call&& call) {
    if (fatal_ != kSuccess) return Reading<T>::absent(fatal_reason());
    if (!available || state_.unsupported.test(bit(q))) return Reading<T>::absent(Absent::NotSupported);
    T value{};
    last_ = call(value);
    if (last_ == kSuccess) return Reading<T>(std::move(value));
    return Reading<T>::absent(classify(q, last_));
  }

  Return fatal() const noexcept { return fatal_; }
  Absent fatal_reason() const noexcept { return lost(fatal_) ? Absent::GpuLost : Absent::Error; }
  // RESET_REQUIRED is reported as health "error" (see unreachable_device), so its fields say "error" too.
  static bool lost(Return r) noexcept { return r == kErrorGpuIsLost; }
  Return last() const noexcept { return last_; }

 private:
  Absent classify(Query q, Return r) {
    switch (r) {
      case kErrorNotSupported:
      case kErrorFunctionNotFound:
      case kErrorArgumentVersionMismatch:  // the driver does not know this struct version
        state_.unsupported.set(bit(q));
        return Absent::NotSupported;
      case kErrorNoPermission: return Absent::NoPermission;
      case kErrorGpuIsLost:
      case kErrorResetRequired: fatal_ = r; return fatal_reason();
      default: return Absent::Error;
    }
  }

  DeviceState& state_;
  Return fatal_ = kSuccess;
  Return last_ = kSuccess;
};

Return read_string(FnDeviceString* fn, Device device, std::string& out) {
  char buffer[kDeviceStringLength] = {};
  const Return r = fn(device, buffer, sizeof buffer);
  if (r == kSuccess) out.assign(buffer, strnlen(buffer, sizeof buffer));
  return r;
}

std::string format_bus_id(unsigned domain, unsigned bus, unsigned device) {
  // The same form as nvmlPciInfo_t.busId (v3): 8-digit domain, upper-case hex, function 0.
  return fmt::format("{:08X}:{:02X}:{:02X}.0", domain, bus, device);
}

void read_identity(const Api& api, Device device, DeviceState& state, Asker& asker) {
  auto once = [&](std::optional<std::string>& slot, Query q, FnDeviceString* fn) {
    if (slot) return;
    auto r = asker.ask<std::string>(q, fn != nullptr, [&](std::string& out) { return read_string(fn, device, out); });
    if (r) slot = *r;
  };
  once(state.uuid, Query::Uuid, api.uuid);
  once(state.name, Query::Name, api.name);
  if (state.pci_bus_id) return;
  auto pci = asker.ask<std::string>(Query::PciInfo, api.pci_info != nullptr, [&](std::string& out) {
    PciInfo info{};
    const Return r = api.pci_info(device, &info);
    if (r == kSuccess) {
      out.assign(info.bus_id, strnlen(info.bus_id, sizeof info.bus_id));
      if (out.empty()) out = format_bus_id(info.domain, info.bus, info.device);
    }
    return r;
  });
  if (!pci && pci.why() == Absent::NotSupported) {
    // The older struct's 16-byte busId may be truncated or in the 4-digit-domain form; the numbers
    // sit at the same offsets in both layouts, so build the id from them.
    pci = asker.ask<std::string>(Query::PciInfoLegacy, api.pci_info_legacy != nullptr, [&](std::string& out) {
      PciInfoLegacy info{};
      const Return r = api.pci_info_legacy(device, &info);
      if (r == kSuccess) out = format_bus_id(info.domain, info.bus, info.device);
      return r;
    });
  }
  if (pci) state.pci_bus_id = *pci;
}

struct MemoryMib {
  std::uint64_t total = 0;
  std::uint64_t used = 0;
  std::uint64_t free = 0;
};

void read_memory(const Api& api, Device device, Asker& asker, core::GpuReading& g) {
  // _v2 first: its `used` leaves out the memory the driver reserves, which no process can get.
  auto mem = asker.ask<MemoryMib>(Query::MemoryV2, api.memory_info_v2 != nullptr, [&](MemoryMib& out) {
    MemoryV2 m{};
    m.version = kMemoryV2Version;
    const Return r = api.memory_info_v2(device, &m);
    out = {m.total_bytes / kBytesPerMiB, m.used_bytes / kBytesPerMiB, m.free_bytes / kBytesPerMiB};
    return r;
  });
  if (!mem && mem.why() == Absent::NotSupported) {
    mem = asker.ask<MemoryMib>(Query::Memory, api.memory_info != nullptr, [&](MemoryMib& out) {
      Memory m{};
      const Return r = api.memory_info(device, &m);
      out = {m.total_bytes / kBytesPerMiB, m.used_bytes / kBytesPerMiB, m.free_bytes / kBytesPerMiB};
      return r;
    });
  }
  g.memory_total_mib = convert<std::uint64_t>(mem, [](const MemoryMib& m) { return m.total; });
  g.memory_used_mib = convert<std::uint64_t>(mem, [](const MemoryMib& m) { return m.used; });
  g.memory_free_mib = convert<std::uint64_t>(mem, [](const MemoryMib& m) { return m.free; });
}

void read_gauges(const Api& api, Device device, Asker& asker, core::GpuReading& g) {
  auto util = asker.ask<Utilization>(Query::Utilization, api.utilization != nullptr,
                                     [&](Utilization& out) { return api.utilization(device, &out); });
  g.utilization_pct = convert<unsigned>(util, [](const Utilization& u) { return u.gpu_pct; });
  g.memory_utilization_pct = convert<unsigned>(util, [](const Utilization& u) { return u.memory_pct; });

  auto temp = asker.ask<unsigned>(Query::Temperature, api.temperature != nullptr,
                                  [&](unsigned& out) { return api.temperature(device, kTemperatureGpu, &out); });
  g.temperature_c = convert<int>(temp, [](unsigned c) { return static_cast<int>(c); });

  auto power_mw = asker.ask<unsigned>(Query::PowerUsage, api.power_usage != nullptr,
                                      [&](unsigned& out) { return api.power_usage(device, &out); });
  g.power_draw_w = convert<double>(power_mw, [](unsigned mw) { return mw / 1000.0; });

  g.fan_pct = asker.ask<unsigned>(Query::FanSpeed, api.fan_speed != nullptr,
                                  [&](unsigned& out) { return api.fan_speed(device, &out); });
  g.clock_graphics_mhz = asker.ask<unsigned>(Query::ClockGraphics, api.clock != nullptr,
                                             [&](unsigned& out) { return api.clock(device, kClockGraphics, &out); });
  g.clock_memory_mhz = asker.ask<unsigned>(Query::ClockMemory, api.clock != nullptr,
                                           [&](unsigned& out) { return api.clock(device, kClockMemory, &out); });

  auto reasons =
      asker.ask<unsigned long long>(Query::ClockEventReasons, api.clock_event_reasons != nullptr,
                                    [&](unsigned long long& out) { return api.clock_event_reasons(device, &out); });
  g.clock_event_reasons = convert<std::uint64_t>(reasons, [](unsigned long long m) { return std::uint64_t{m}; });

  auto pstate = asker.ask<int>(Query::PerformanceState, api.performance_state != nullptr,
                               [&](int& out) { return api.performance_state(device, &out); });
  if (pstate && (*pstate < 0 || *pstate > 15))  // 32 is NVML_PSTATE_UNKNOWN
    g.performance_state = Reading<unsigned>::absent(Absent::Unavailable);
  else
    g.performance_state = convert<unsigned>(pstate, [](int p) { return static_cast<unsigned>(p); });
}

// The slow fields (kSlowReadInterval): the settings an operator changes (power limit, persistence mode,
// MIG mode: ~0.14 ms a call on an H100, and it changes at an operator's command) and the health counters (ECC, retired
// pages, remapped rows, PCIe replays). Each is one query, probed once: Hopper answers NOT_SUPPORTED to the retired-page
// queries (it remaps rows instead), so they stay absent with that reason and are never asked again.
void read_slow_fields(const Api& api, Device device, Asker& asker, core::GpuReading& g) {
  auto limit_mw = asker.ask<unsigned>(Query::PowerLimit, api.power_limit != nullptr,
                                      [&](unsigned& out) { return api.power_limit(device, &out); });
  g.power_limit_w = convert<double>(limit_mw, [](unsigned mw) { return mw / 1000.0; });
  auto persistence = asker.ask<int>(Query::PersistenceMode, api.persistence_mode != nullptr,
                                    [&](int& out) { return api.persistence_mode(device, &out); });
  g.persistence_mode = convert<bool>(persistence, [](int mode) { return mode == kFeatureEnabled; });
  auto mig = asker.ask<unsigned>(Query::MigMode, api.mig_mode != nullptr, [&](unsigned& current) {
    unsigned pending = 0;
    return api.mig_mode(device, &current, &pending);
  });
  g.mig_enabled = convert<bool>(mig, [](unsigned current) { return current == kMigEnabled; });
  auto counter = [](const Reading<unsigned long long>& r) {
    return convert<std::uint64_t>(r, [](unsigned long long n) { return std::uint64_t{n}; });
  };
  auto ecc = [&](Query q, int error_type, int counter_type) {
    return counter(asker.ask<unsigned long long>(q, api.ecc_total != nullptr, [&](unsigned long long& out) {
      return api.ecc_total(device, error_type, counter_type, &out);
    }));
  };
  g.ecc_uncorrected_volatile = ecc(Query::EccUncorrected, kEccUncorrected, kEccVolatile);
  g.ecc_corrected_volatile = ecc(Query::EccCorrectedVolatile, kEccCorrected, kEccVolatile);
  g.ecc_corrected_aggregate = ecc(Query::EccCorrectedAggregate, kEccCorrected, kEccAggregate);
  g.ecc_uncorrected_aggregate = ecc(Query::EccUncorrectedAggregate, kEccUncorrected, kEccAggregate);

  // The count alone: a NULL buffer with a count of 0 asks for the size (SUCCESS, or INSUFFICIENT_SIZE
  // with the count set when pages exist); the addresses are not needed.
  auto retired = [&](Query q, int cause) {
    return asker.ask<unsigned>(q, api.retired_pages != nullptr, [&](unsigned& out) {
      unsigned count = 0;
      const Return r = api.retired_pages(device, cause, &count, nullptr);
      out = count;
      return r == kErrorInsufficientSize ? kSuccess : r;
    });
  };
  auto pages = [](const Reading<unsigned>& r) {
    return convert<std::uint64_t>(r, [](unsigned n) { return std::uint64_t{n}; });
  };
  g.retired_pages_sbe = pages(retired(Query::RetiredPagesSbe, kRetiredForSingleBit));
  g.retired_pages_dbe = pages(retired(Query::RetiredPagesDbe, kRetiredForDoubleBit));
  auto pending = asker.ask<int>(Query::RetiredPagesPending, api.retired_pages_pending != nullptr,
                                [&](int& out) { return api.retired_pages_pending(device, &out); });
  g.retired_pages_pending = convert<bool>(pending, [](int state) { return state == kFeatureEnabled; });

  struct Rows {
    unsigned correctable = 0, uncorrectable = 0, pending = 0, failure = 0;
  };
  auto rows = asker.ask<Rows>(Query::RemappedRows, api.remapped_rows != nullptr, [&](Rows& out) {
    return api.remapped_rows(device, &out.correctable, &out.uncorrectable, &out.pending, &out.failure);
  });
  g.remapped_rows_correctable =
      convert<std::uint64_t>(rows, [](const Rows& r) { return std::uint64_t{r.correctable}; });
  g.remapped_rows_uncorrectable =
      convert<std::uint64_t>(rows, [](const Rows& r) { return std::uint64_t{r.uncorrectable}; });
  g.remapped_rows_pending = convert<bool>(rows, [](const Rows& r) { return r.pending != 0; });
  g.remapped_rows_failure = convert<bool>(rows, [](const Rows& r) { return r.failure != 0; });

  auto replays = asker.ask<unsigned>(Query::PcieReplay, api.pcie_replay_counter != nullptr,
                                     [&](unsigned& out) { return api.pcie_replay_counter(device, &out); });
  g.pcie_replay_count = pages(replays);
}

// Copies the members read_slow_fields() sets.
void copy_slow_fields(const core::GpuReading& from, core::GpuReading& to) {
  to.power_limit_w = from.power_limit_w;
  to.persistence_mode = from.persistence_mode;
  to.mig_enabled = from.mig_enabled;
  for (auto member : {&core::GpuReading::ecc_uncorrected_volatile, &core::GpuReading::ecc_corrected_volatile,
                      &core::GpuReading::ecc_corrected_aggregate, &core::GpuReading::ecc_uncorrected_aggregate,
                      &core::GpuReading::retired_pages_sbe, &core::GpuReading::retired_pages_dbe,
                      &core::GpuReading::remapped_rows_correctable, &core::GpuReading::remapped_rows_uncorrectable,
                      &core::GpuReading::pcie_replay_count})
    to.*member = from.*member;
  for (auto member : {&core::GpuReading::retired_pages_pending, &core::GpuReading::remapped_rows_pending,
                      &core::GpuReading::remapped_rows_failure})
    to.*member = from.*member;
}

struct RawProcess {
  std::uint32_t pid = 0;
  std::optional<std::uint64_t> used_mib;
  std::optional<unsigned> gpu_instance_id;  // MIG: the instance the driver says the process runs in
  std::optional<unsigned> compute_instance_id;
};

std::optional<unsigned> mig_id(unsigned id) {
  if (id == kNoMigInstance) return std::nullopt;
  return id;
}
using ProcessList = std::vector<RawProcess>;

// One process-list call with NVML's count-in/count-out protocol: on INSUFFICIENT_SIZE, `count`
// holds the size needed; grow and ask again.
template <class Info>
Return list_processes(Return (*fn)(Device, unsigned*, Info*), Device device, unsigned& capacity, ProcessList& out) {
  std::vector<Info> buffer(std::max(capacity, 1u));
  for (int attempt = 0; attempt < kProcessListAttempts; ++attempt) {
    unsigned count = static_cast<unsigned>(buffer.size());
    const Return r = fn(device, &count, buffer.data());
    if (r == kErrorInsufficientSize) {
      buffer.resize(std::max<std::size_t>(count + kProcessHeadroom, buffer.size() + 1));
      capacity = static_cast<unsigned>(buffer.size());
      continue;
    }
    if (r != kSuccess) return r;
    count = std::min(count, static_cast<unsigned>(buffer.size()));
    out.reserve(count);
    for (unsigned i = 0; i < count; ++i) {
      RawProcess p{buffer[i].pid, bytes_to_mib(buffer[i].used_gpu_memory_bytes), std::nullopt, std::nullopt};
      if constexpr (std::is_same_v<Info, ProcessInfoV2>) {  // the v1 layout has no MIG ids
        p.gpu_instance_id = mig_id(buffer[i].gpu_instance_id);
        p.compute_instance_id = mig_id(buffer[i].compute_instance_id);
      }
      out.push_back(p);
    }
    return kSuccess;
  }
  return kErrorInsufficientSize;
}

struct MergedProcess {
  std::uint32_t pid = 0;
  std::optional<std::uint64_t> used_mib;
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  bool compute = false;
  bool graphics = false;
  bool mps = false;
};

void merge(std::vector<MergedProcess>& all, const ProcessList& list, bool MergedProcess::*kind) {
  for (const auto& p : list) {
    auto it = std::find_if(all.begin(), all.end(), [&](const MergedProcess& m) { return m.pid == p.pid; });
    if (it == all.end()) it = all.insert(all.end(), MergedProcess{p.pid, std::nullopt, std::nullopt, std::nullopt});
    (*it).*kind = true;
    if (p.gpu_instance_id && !it->gpu_instance_id) {
      it->gpu_instance_id = p.gpu_instance_id;
      it->compute_instance_id = p.compute_instance_id;
    }
    // The lists report the same process's memory; a known value beats an unknown one.
    if (p.used_mib) it->used_mib = std::max(it->used_mib.value_or(0), *p.used_mib);
  }
}

core::ProcessKind kind_of(const MergedProcess& m) {
  if (m.compute && m.graphics) return core::ProcessKind::ComputeGraphics;
  if (m.compute) return core::ProcessKind::Compute;
  if (m.graphics) return core::ProcessKind::Graphics;
  return core::ProcessKind::Mps;
}

void read_processes(const Api& api, Device device, unsigned index, DeviceState& state, Asker& asker,
                    DeviceResult& result) {
  std::vector<MergedProcess> merged;
  // Reads one list: the v2-layout entry point, then the v1 layout when the first is absent.
  auto read_list = [&](const char* what, Query q, FnDeviceProcesses* fn, Query q_v1, FnDeviceProcessesV1* fn_v1,
                       bool MergedProcess::*kind) {
    auto list = asker.ask<ProcessList>(
        q, fn != nullptr, [&](ProcessList& out) { return list_processes(fn, device, state.process_capacity, out); });
    if (!list && list.why() == Absent::NotSupported && q_v1 != q) {
      list = asker.ask<ProcessList>(q_v1, fn_v1 != nullptr, [&](ProcessList& out) {
        return list_processes(fn_v1, device, state.process_capacity, out);
      });
    }
    if (list) {
      merge(merged, *list, kind);
    } else if (list.why() != Absent::NotSupported && asker.fatal() == kSuccess) {
      result.process_problems.push_back(
          fmt::format("GPU {}: cannot list {} processes: {}", index, what, describe(api, asker.last())));
    }
  };
  read_list("compute", Query::ComputeProcesses, api.compute_processes, Query::ComputeProcessesV1,
            api.compute_processes_v1, &MergedProcess::compute);
  read_list("graphics", Query::GraphicsProcesses, api.graphics_processes, Query::GraphicsProcessesV1,
            api.graphics_processes_v1, &MergedProcess::graphics);
  read_list("MPS compute", Query::MpsProcesses, api.mps_processes, Query::MpsProcesses, nullptr, &MergedProcess::mps);

  auto& out = result.reading.processes;
  out.reserve(merged.size());
  for (const auto& m : merged) {
    core::GpuProcess p;
    p.pid = m.pid;
    p.used_memory_mib = m.used_mib;
    p.kind = kind_of(m);
    p.gpu_instance_id = m.gpu_instance_id;
    p.compute_instance_id = m.compute_instance_id;
    out.push_back(std::move(p));
  }
}

// The MIG devices of a GPU in MIG mode. A driver without MIG device handles leaves the list empty
// (and is not asked again); a lost parent stops the reading like any other call.
void read_mig(const Api& api, Device device, unsigned index, DeviceState& state, Asker& asker, DeviceResult& result) {
  std::vector<std::string> problems;
  auto instances = asker.ask<std::vector<core::MigInstance>>(
      Query::MigDevices, api.max_mig_devices != nullptr && api.mig_device_handle != nullptr,
      [&](std::vector<core::MigInstance>& out) { return read_mig_devices(api, device, state.mig, out, problems); });
  if (instances) {
    result.reading.mig_instances = *instances;
  } else if (instances.why() != Absent::NotSupported && asker.fatal() == kSuccess) {
    problems.push_back(fmt::format("cannot list MIG devices: {}", describe(api, asker.last())));
  }
  for (auto& p : problems) result.mig_problems.push_back(fmt::format("GPU {}: {}", index, p));
}

// The costly counters (kCounterReadInterval): the energy counter and the violation times, asked when due
// or not yet read, else their last values. A read that failed leaves `counters_read` false, so the next
// reading asks again; NOT_SUPPORTED is an answer (the asker does not ask it again anyway).
void read_counters(const Api& api, Device device, DeviceState& state, Asker& asker, bool due, core::GpuReading& g) {
  if (!due && state.counters_read) {
    g.energy_mj = state.energy_mj;
    g.power_violation_us = state.power_violation_us;
    g.thermal_violation_us = state.thermal_violation_us;
    return;
  }
  auto mj = asker.ask<unsigned long long>(Query::Energy, api.energy != nullptr,
                                          [&](unsigned long long& out) { return api.energy(device, &out); });
  g.energy_mj = convert<std::uint64_t>(mj, [](unsigned long long v) { return std::uint64_t{v}; });
  // NVML gives nanoseconds; the field is microseconds (dcgm-exporter's DCGM_FI_DEV_*_VIOLATION unit):
  // time the clocks were held down by the power cap or by heat, climbing by the second while they are.
  auto violation = [&](Query q, int policy) {
    auto v = asker.ask<ViolationTime>(q, api.violation_status != nullptr,
                                      [&](ViolationTime& out) { return api.violation_status(device, policy, &out); });
    return convert<std::uint64_t>(v, [](const ViolationTime& t) { return std::uint64_t{t.violation_time_ns / 1000}; });
  };
  g.power_violation_us = violation(Query::ViolationPower, kPerfPolicyPower);
  g.thermal_violation_us = violation(Query::ViolationThermal, kPerfPolicyThermal);
  state.energy_mj = g.energy_mj;
  state.power_violation_us = g.power_violation_us;
  state.thermal_violation_us = g.thermal_violation_us;
  auto settled = [](const core::Reading<std::uint64_t>& r) { return r || r.why() == Absent::NotSupported; };
  state.counters_read = settled(g.energy_mj) && settled(g.power_violation_us) && settled(g.thermal_violation_us);
}

}  // namespace

DeviceResult read_device(const Api& api, Device device, unsigned index, DeviceState& state, bool read_slow,
                         bool read_counters_now) {
  Asker asker(state);
  DeviceResult result;
  auto& g = result.reading;
  g.index = index;
  read_slow = read_slow || !state.slow;

  read_identity(api, device, state, asker);
  read_memory(api, device, asker, g);
  read_gauges(api, device, asker, g);
  read_counters(api, device, state, asker, read_counters_now, g);
  if (read_slow)
    read_slow_fields(api, device, asker, g);
  else
    copy_slow_fields(*state.slow, g);
  if (g.mig_enabled && *g.mig_enabled) read_mig(api, device, index, state, asker, result);
  read_processes(api, device, index, state, asker, result);
  // With MIG on, the whole-GPU utilization counters are not kept (NVML answers NOT_SUPPORTED; the MIG
  // instances have their own): say so rather than "not supported", which reads as a hardware limit.
  if (g.mig_enabled && *g.mig_enabled) {
    for (auto* r : {&g.utilization_pct, &g.memory_utilization_pct})
      if (!*r && r->why() == Absent::NotSupported) *r = Reading<unsigned>::absent(Absent::MigEnabled);
  }

  if (asker.fatal() != kSuccess) {
    // The GPU went away mid-read: report it as a whole, not a half-filled reading. When it answers
    // again (a reset), its slow fields are asked afresh.
    state.slow.reset();
    state.counters_read = false;
    DeviceResult gone;
    gone.reading = unreachable_device(api, index, asker.fatal());
    gone.reading.uuid = state.uuid.value_or("");
    gone.reading.name = state.name.value_or("");
    gone.reading.pci_bus_id = state.pci_bus_id.value_or("");
    return gone;
  }
  g.uuid = state.uuid.value_or("");
  g.name = state.name.value_or("");
  g.pci_bus_id = state.pci_bus_id.value_or("");
  if (read_slow) copy_slow_fields(g, state.slow.emplace());
  return result;
}

core::GpuReading unreachable_device(const Api& api, unsigned index, Return code, std::string_view context) {
  core::GpuReading g;
  g.index = index;
  core::mark_all_absent(g, code == kErrorGpuIsLost ? Absent::GpuLost : Absent::Error);
  if (code == kErrorGpuIsLost) {
    g.health = core::Health::Lost;
    const char* text = api.error_string ? api.error_string(code) : nullptr;
    g.health_message = text && *text ? text : "GPU is lost";
  } else {
    g.health = core::Health::Error;
    g.health_message = context.empty() ? describe(api, code) : fmt::format("{}: {}", context, describe(api, code));
  }
  return g;
}

}  // namespace gf::backends::nvml
