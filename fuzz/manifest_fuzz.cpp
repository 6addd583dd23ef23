// libFuzzer target for manifest placement: `gpufleet cluster place -f FILE` reads whatever the user
// (or a generator) wrote. Crashes, sanitizer reports, exceptions leaving place_manifest and the
// invariant traps below are findings.
//
// Input layout: byte 0 chooses the options (bit 0: pin to a node; bit 1: --gpus, with bits 2-4 as
// its value; bit 5: a numeric node name, which must stay a string); the rest is the manifest text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/manifest.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// An error is one line of printable text: it reaches a terminal as it is.
void check_error(const gf::Error& e) {
  check(!e.message.empty());
  for (const char c : e.message) check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  gf::cluster::PlaceOptions options;
  if (mode & 1) options.node = (mode & 32) ? "12345" : "gpu-node-1";
  if (mode & 2) options.gpus = (mode >> 2) & 7;

  const auto r = gf::cluster::place_manifest(text, options);
  if (!r) {
    check_error(r.error());
    return 0;
  }
  if (!options.node) {
    // No node, no change: the manifest goes through byte for byte.
    check(!r->changed());
    check(r->output == text);
    return 0;
  }
  for (const auto& d : r->documents) {
    check(d.changed == !d.changes.empty());
    if (d.changed) check(d.placeable);
  }
  // What place writes, place reads, and placing it again on the same node changes nothing.
  const auto again = gf::cluster::place_manifest(r->output, options);
  check(again.has_value());
  check(!again->changed());
  check(again->documents.size() == r->documents.size());
  return 0;
}
