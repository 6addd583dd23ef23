// The amdgpu backend: GPUs from sysfs (card.cpp), processes from DRM fdinfo (proc_scan.cpp).
// Everything the kernel driver exposes is read without a vendor library, so this works wherever
// the amdgpu kernel module is loaded, ROCm or not.
#include "backends/amdgpu/amdgpu_backend.hpp"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "backends/amdgpu/card.hpp"
#include "backends/amdgpu/drm_clients.hpp"
#include "backends/drm/proc_scan.hpp"
#include "platform/clock.hpp"
#include "platform/fs.hpp"

namespace gf::backends {
namespace {

class AmdgpuBackend final : public Backend {
 public:
  AmdgpuBackend(const BackendOptions& opts, std::vector<amdgpu::CardInfo> cards, std::string driver_version)
      : clock_(opts.clock != nullptr ? opts.clock : &platform::system_clock()),
        proc_root_(opts.proc_root),
        cards_(std::move(cards)),
        driver_version_(std::move(driver_version)) {}

  std::string_view name() const noexcept override { return "amdgpu"; }

  Result<core::Snapshot> snapshot() override {
    // Boundary: nothing here throws by design, but an exception (bad_alloc) must not cross into
    // the sampler's thread as anything other than a failed reading.
    try {
      return take_snapshot();
    } catch (const std::exception& e) {
      return make_error(fmt::format("amdgpu: snapshot failed: {}", e.what()));
    }
  }

 private:
  core::Snapshot take_snapshot() const {
    core::Snapshot s;
    s.timestamp = clock_->wall_now();
    s.backend = "amdgpu";
    s.driver_version = driver_version_;
    // One walk of /proc serves every card: the fdinfo records name their GPU (drm-pdev).
    const drm::DrmScan scan = drm::scan_drm_clients(proc_root_, {"amdgpu"});
    s.gpus.reserve(cards_.size());
    for (std::size_t i = 0; i < cards_.size(); ++i) {
      core::GpuReading g = amdgpu::read_card(cards_[i], static_cast<unsigned>(i));
      // Attributed even when the card is in error: fdinfo is a separate source and still tells
      // who holds the device open.
      g.processes = amdgpu::processes_on(scan.tally, cards_[i].pci_bus_id);
      s.gpus.push_back(std::move(g));
    }
    drm::note_visibility(scan, s);
    return s;
  }

  const core::Clock* clock_;
  std::string proc_root_;
  std::vector<amdgpu::CardInfo> cards_;  // found once at open: GPUs are not hot-plugged in practice
  std::string driver_version_;
};

}  // namespace

Result<std::unique_ptr<Backend>> open_amdgpu(const BackendOptions& opts) {
  try {
    auto cards = amdgpu::discover_cards(opts.sysfs_root);
    if (cards.empty())
      return make_error("amdgpu: no AMD GPU under " + platform::under_root(opts.sysfs_root, "/sys/class/drm"));
    // Only the out-of-tree (DKMS) driver sets a module version; the in-kernel one has none, and
    // the kernel release would say little about the amdgpu code in it.
    std::string version =
        platform::read_line(platform::under_root(opts.sysfs_root, "/sys/module/amdgpu/version")).value_or("");
    return std::unique_ptr<Backend>(std::make_unique<AmdgpuBackend>(opts, std::move(cards), std::move(version)));
  } catch (const std::exception& e) {
    return make_error(fmt::format("amdgpu: cannot open: {}", e.what()));
  }
}

}  // namespace gf::backends
