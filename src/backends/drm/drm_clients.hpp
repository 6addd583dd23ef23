#pragma once
// Collects the DRM clients of a /proc scan, each counted once. Pure: the caller reads the files.
//
// Why a tally and not a sum per fd: one DRM client (one open() of /dev/dri/renderD*) shows up in
// every fd that refers to it (dup(), fork(), SCM_RIGHTS), each fdinfo repeating the client's whole
// memory and engine time. Keeping each (pdev, pid, client id) once avoids double counting; what a
// pid uses on a GPU is then the sum over its distinct clients there (e.g. a GL and a Vulkan context).
// Thread-safety: none; one tally per scan.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backends/drm/fdinfo.hpp"

namespace gf::backends::drm {

// One process's clients on one GPU.
struct ProcessClients {
  std::uint32_t pid = 0;
  std::vector<const DrmFdinfo*> clients;  // by client id ascending; point into the tally
};

class DrmClientTally {
 public:
  // A scan of a hostile box (thousands of DRM fds opened by one user) must not grow us without bound:
  // past this many distinct clients the rest are counted in dropped() and not kept.
  static constexpr std::size_t kMaxClients = 16384;

  // Keeps only records whose drm-driver is one of drivers.
  explicit DrmClientTally(std::vector<std::string> drivers, std::size_t max_clients = kMaxClients);

  // Records one fdinfo of pid. Ignored: other drivers, records without a drm-pdev (cannot be tied
  // to a GPU) and without a drm-client-id (cannot be told apart from a duplicate fd; the kernel
  // always prints one, so only a garbled file lacks it). The first fd of a client wins: later fds
  // of it were read moments later and describe the same client.
  void add(std::uint32_t pid, const DrmFdinfo& info);

  // The processes holding a client of the GPU at PCI address pdev (lower case), by pid ascending.
  std::vector<ProcessClients> processes_on(std::string_view pdev) const;

  // The PCI addresses that have at least one client, ascending.
  std::vector<std::string> pdevs() const;

  bool empty() const noexcept { return clients_.empty(); }
  std::size_t size() const noexcept { return clients_.size(); }
  std::size_t dropped() const noexcept { return dropped_; }
  std::size_t max_clients() const noexcept { return max_clients_; }

 private:
  std::vector<std::string> drivers_;
  std::size_t max_clients_;
  std::size_t dropped_ = 0;
  // (pdev, pid, client id) -> the client's first record.
  std::map<std::tuple<std::string, std::uint32_t, std::uint64_t>, DrmFdinfo, std::less<>> clients_;
};

// a + b, held at UINT64_MAX instead of wrapping: values come from the kernel, but a corrupt file
// must not wrap a total into a small, plausible number.
constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

}  // namespace gf::backends::drm
