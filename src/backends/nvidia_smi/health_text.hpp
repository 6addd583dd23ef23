#pragma once
// The health readings nvidia-smi's --query-gpu does not have (issue 21), and when to ask for them.
//
//   nvidia-smi --query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,
//              remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure
//              --format=csv,noheader,nounits
//     one line per GPU that has row remapping (Ampere and later data-centre GPUs). Pending and failure
//     read "0"/"1" in the CSV, "No"/"Yes" in -q; both are taken.
//   nvidia-smi -q -x   (parsed with the MIG fields in mig_text.hpp) gives the PCIe replay counter
//     (<pci><replay_counter>) and, on drivers that print "Clocks Event Reasons Counters" (the H100
//     capture's 580 does; 510 does not), the time in µs the clocks were held down.
//
// Pure parsers: no I/O, no exceptions out, linear in the input (fed random bytes by a fuzz target).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::backends::nvidia_smi {

inline constexpr std::string_view kRemappedRowsQuery =
    "gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,"
    "remapped_rows.failure";

struct RemappedRows {
  std::string bus_id;  // "00000000:65:00.0"
  std::string uuid;
  core::Reading<std::uint64_t> correctable;
  core::Reading<std::uint64_t> uncorrectable;
  core::Reading<bool> pending;
  core::Reading<bool> failure;
};

// Parses --query-remapped-rows output (columns as in kRemappedRowsQuery). [N/A] reads as absent
// Unavailable, [Not Supported] as NotSupported, never 0. A line with the wrong number of columns or
// a value that is no number is an error naming the line; blank lines and "No devices were found"
// are skipped.
Result<std::vector<RemappedRows>> parse_remapped_rows(std::string_view text);

// Copies the row for `g` (matched by UUID, else by bus id) into its remapped_rows_* readings; a GPU
// the answer does not list gets them absent, NotSupported (nvidia-smi lists only GPUs that remap).
void apply_remapped_rows(const std::vector<RemappedRows>& rows, core::GpuReading& g);

// A query that runs at most once per `interval` (on the caller's steady clock); the first is due at
// once. Between runs the caller keeps the last answer.
class Every {
 public:
  explicit Every(std::chrono::steady_clock::duration interval) : interval_(interval) {}
  bool due(std::chrono::steady_clock::time_point now) const noexcept { return !last_ || now - *last_ >= interval_; }
  void ran(std::chrono::steady_clock::time_point now) noexcept { last_ = now; }

 private:
  std::chrono::steady_clock::duration interval_;
  std::optional<std::chrono::steady_clock::time_point> last_;
};

}  // namespace gf::backends::nvidia_smi
