#pragma once
// Pure parsers for what nvidia-smi says about MIG devices, and the join into a GPU table. No I/O, no
// exceptions out, linear in the input; fed untrusted text (and random bytes by the fuzz target).
//
//   nvidia-smi -L     one line per GPU, then one per MIG device under it:
//                       GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-7fdaf0a5-…)
//                         MIG 1g.10gb     Device  0: (UUID: MIG-feb88891-…)
//                     (drivers before R470 print the device as MIG-GPU-<uuid>/<gi>/<ci>)
//   nvidia-smi -q -x  the query interface as XML: per <gpu>, its <uuid>, <mig_devices><mig_device> with
//                     <index>, <gpu_instance_id>, <compute_instance_id> and <fb_memory_usage> (MiB), and
//                     <processes><process_info> with <pid> and the process's instance ids; and the
//                     health counters --query-gpu lacks: <pci><replay_counter> and, where the driver
//                     prints them, <clocks_event_reasons_counters> (µs; see health_text.hpp).
// -L names each device (UUID, profile) by its MIG device index; -q -x gives the same index its ids and
// memory. Together they fill core::MigInstance.
//
// Thread-safety: every function here is pure and may be called from any thread.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvidia_smi {

// Bounds on what one answer may make us keep.
inline constexpr std::size_t kMaxListedGpus = 1024;
inline constexpr std::size_t kMaxMigPerGpu = 32;
inline constexpr std::size_t kMaxXmlProcessesPerGpu = 4096;

struct ListedMig {
  std::string profile;                      // "1g.10gb"
  unsigned device = 0;                      // the MIG device index ("Device  3")
  std::string uuid;                         // "MIG-…"
  std::optional<unsigned> gpu_instance_id;  // only from the old MIG-GPU-<uuid>/<gi>/<ci> form
  std::optional<unsigned> compute_instance_id;
};

struct ListedGpu {
  unsigned index = 0;
  std::string uuid;
  std::vector<ListedMig> migs;
};

// Parses `nvidia-smi -L`. Lines it does not know are skipped (the tool prints notices); a MIG line
// before any GPU line, or a GPU/MIG line it cannot read, is an error naming the line.
Result<std::vector<ListedGpu>> parse_list(std::string_view text);

struct XmlMig {
  unsigned index = 0;
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  core::Reading<std::uint64_t> memory_total_mib;
  core::Reading<std::uint64_t> memory_used_mib;
  core::Reading<std::uint64_t> memory_free_mib;
};

struct XmlProcess {
  std::uint32_t pid = 0;
  std::optional<unsigned> gpu_instance_id;  // "N/A" when MIG is off
  std::optional<unsigned> compute_instance_id;
};

struct XmlGpu {
  std::string uuid;
  std::vector<XmlMig> migs;
  std::vector<XmlProcess> processes;
  // Absent NotSupported when the element is missing (the driver does not print it), Unavailable for
  // "N/A", never 0 for either.
  core::Reading<std::uint64_t> pcie_replay_count;
  core::Reading<std::uint64_t> power_violation_us;    // "SW Power Capping" counter
  core::Reading<std::uint64_t> thermal_violation_us;  // "SW Thermal Slowdown" counter
};

// Parses the parts of `nvidia-smi -q -x` named above; other elements are skipped. An answer that is
// not nvidia-smi's XML (no <nvidia_smi_log>, an unclosed tag) is an error.
Result<std::vector<XmlGpu>> parse_query_xml(std::string_view xml);

// Fills mig_instances of the GPUs in MIG mode (matched by UUID) from the -L listing, with ids and
// memory from the XML's device of the same MIG index; a device the XML does not describe is left out
// (its ids are unknown) unless -L's old form carries them, in which case its memory is absent. Also
// sets the instance ids of the GPUs' processes from the XML (by pid). Returns one sentence per device
// left out.
std::vector<std::string> add_mig_instances(std::vector<core::GpuReading>& gpus, const std::vector<ListedGpu>& listed,
                                           const std::vector<XmlGpu>& xml);

}  // namespace gf::backends::nvidia_smi
