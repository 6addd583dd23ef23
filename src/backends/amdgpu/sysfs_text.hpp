#pragma once
// Pure parsers of amdgpu sysfs files whose content is more than one number. No I/O here, so they
// can be fuzzed and unit-tested on strings.
//
// Contract: any byte string is accepted, nothing throws, no undefined behaviour on overflow, work is
// linear in the input size. Thread-safety: stateless.
#include <cstdint>
#include <optional>
#include <string_view>

namespace gf::backends::amdgpu {

// The current level of a pp_dpm_sclk / pp_dpm_mclk table, in MHz: the line marked with '*'
// ("1: 1800Mhz *"). nullopt when no line is marked or the marked line is malformed.
std::optional<unsigned> parse_dpm_current_mhz(std::string_view text);

// The "ue: N" (uncorrectable errors) count of a ras/*_err_count file; nullopt when missing/garbled.
std::optional<std::uint64_t> parse_ras_uncorrectable(std::string_view text);

}  // namespace gf::backends::amdgpu
