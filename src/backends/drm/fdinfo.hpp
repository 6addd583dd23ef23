#pragma once
// Pure parser of DRM fdinfo text: the per-client usage keys of the kernel's
// Documentation/gpu/drm-usage-stats.rst, printed by amdgpu (Linux 5.19+), i915 (5.19+) and xe. No
// I/O here, so the parser can be fuzzed and unit-tested on strings.
//
// Contract: every function accepts any byte string (not only UTF-8, not only well-formed), never
// throws except std::bad_alloc, has no undefined behaviour on overflow, and does work linear in
// the input size. Every map it fills holds at most kMaxKeysPerMap entries, every name at most
// kMaxTextValue bytes. Thread-safety: stateless, safe to call from any thread.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace gf::backends::drm {

inline constexpr std::size_t kMaxKeysPerMap = 64;
inline constexpr std::size_t kMaxTextValue = 64;

using CounterMap = std::map<std::string, std::uint64_t, std::less<>>;

// The DRM keys of one /proc/<pid>/fdinfo/<fd> file. Only what gpufleet uses or may soon use is kept.
struct DrmFdinfo {
  std::string driver;                              // drm-driver, e.g. "amdgpu", "i915", "xe"
  std::string pdev;                                // drm-pdev, lower case, e.g. "0000:03:00.0"; empty if absent
  std::optional<std::uint64_t> client_id;          // drm-client-id: one DRM file description
  std::optional<std::uint64_t> memory_vram_bytes;  // drm-memory-vram (the legacy key amdgpu prints)
  std::optional<std::uint64_t> memory_gtt_bytes;   // drm-memory-gtt
  std::optional<std::uint64_t> memory_cpu_bytes;   // drm-memory-cpu
  // drm-total-<region>: bytes of every buffer of the client in that region ("system", "gtt",
  // "vram0", "stolen" for xe; "system0", "local0", "stolen-system0" for i915).
  CounterMap total_bytes;
  // drm-engine-<name>: cumulative busy time per engine class ("gfx", "render", "video", ...).
  CounterMap engine_busy_ns;
  // drm-cycles-<name> and drm-total-cycles-<name> (xe): busy GPU ticks of the class, and the GPU's
  // timestamp in the same ticks; their deltas' ratio is the class's busy share.
  CounterMap engine_cycles;
  CounterMap engine_total_cycles;
  // drm-engine-capacity-<name>: how many engines of the class there are (absent: one).
  CounterMap engine_capacity;
};

// Parses the text of one fdinfo file. nullopt when it is not a DRM file (no drm-driver key) —
// most fds of a process are sockets and plain files. Malformed values are dropped key by key, so
// one bad line does not hide the rest. The first occurrence of a key wins.
std::optional<DrmFdinfo> parse_drm_fdinfo(std::string_view text);

// A memory amount as the kernel prints it: "<uint>" (bytes), "<uint> KiB", "<uint> MiB" or
// "<uint> GiB". nullopt on anything else or when the byte count does not fit 64 bits.
std::optional<std::uint64_t> parse_drm_memory_bytes(std::string_view value);

}  // namespace gf::backends::drm
