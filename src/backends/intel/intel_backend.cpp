// The intel backend: Intel GPUs on the i915 and xe kernel drivers, from sysfs (card.cpp) and DRM
// fdinfo (backends/drm/, engine_usage.cpp), with no vendor library (Level Zero is not needed).
// Power and utilization are rates of kernel counters, so they need two collections: the backend
// keeps the previous energy reading of each card and the previous engine counters of each client.
#include "backends/intel/intel_backend.hpp"

#include <chrono>
#include <cmath>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "backends/drm/proc_scan.hpp"
#include "backends/intel/card.hpp"
#include "backends/intel/engine_usage.hpp"
#include "platform/clock.hpp"
#include "platform/fs.hpp"

namespace gf::backends {
namespace {

using core::Absent;
using core::Reading;
using Steady = std::chrono::steady_clock;

// The last energy reading of one card, to turn the next one into a power draw.
struct EnergySample {
  std::uint64_t uj = 0;
  Steady::time_point at{};
};

// Average power between two readings of the energy counter (µJ). Absent Unavailable on the first
// reading and when the counter went backwards (the driver was reloaded, or a 32-bit hardware counter
// wrapped past the driver's extension): there is no interval to measure over.
Reading<double> power_between(const std::optional<EnergySample>& before, const EnergySample& now) {
  if (!before || now.at <= before->at || now.uj < before->uj) return Reading<double>::absent(Absent::Unavailable);
  const double seconds = std::chrono::duration<double>(now.at - before->at).count();
  return static_cast<double>(now.uj - before->uj) / 1e6 / seconds;
}

class IntelBackend final : public Backend {
 public:
  IntelBackend(const BackendOptions& opts, std::vector<intel::CardInfo> cards, std::string driver_version)
      : clock_(opts.clock != nullptr ? opts.clock : &platform::system_clock()),
        proc_root_(opts.proc_root),
        cards_(std::move(cards)),
        energy_(cards_.size()),
        driver_version_(std::move(driver_version)) {}

  std::string_view name() const noexcept override { return "intel"; }

  Result<core::Snapshot> snapshot() override {
    // Boundary: an exception (bad_alloc) must not cross into the sampler's thread as anything other
    // than a failed reading.
    try {
      return take_snapshot();
    } catch (const std::exception& e) {
      return make_error(fmt::format("intel: snapshot failed: {}", e.what()));
    }
  }

 private:
  core::Snapshot take_snapshot() {
    core::Snapshot s;
    s.timestamp = clock_->wall_now();
    const Steady::time_point now = clock_->now();
    s.backend = "intel";
    s.driver_version = driver_version_;
    // One walk of /proc serves every card: the fdinfo records name their GPU (drm-pdev).
    const drm::DrmScan scan = drm::scan_drm_clients(proc_root_, {"i915", "xe"});
    drm::note_visibility(scan, s);
    usage_.update(scan.tally, now, s.process_visibility.complete);
    s.gpus.reserve(cards_.size());
    for (std::size_t i = 0; i < cards_.size(); ++i) s.gpus.push_back(read_gpu(i, scan, now));
    return s;
  }

  core::GpuReading read_gpu(std::size_t i, const drm::DrmScan& scan, Steady::time_point now) {
    const intel::CardInfo& card = cards_[i];
    core::GpuReading g;
    const bool present = intel::read_card(card, static_cast<unsigned>(i), g);
    if (present) {
      const auto uj = intel::read_energy_uj(card);
      if (uj) {
        g.energy_mj = *uj / 1000;
        const EnergySample sample{*uj, now};
        g.power_draw_w = power_between(energy_[i], sample);
        energy_[i] = sample;
      } else {
        g.energy_mj = Reading<std::uint64_t>::absent(uj.why());
        g.power_draw_w = Reading<double>::absent(uj.why());
        energy_[i].reset();
      }
      g.utilization_pct = usage_.gpu_utilization(card.drm.pci_bus_id);
    }
    // Attributed even when the card is gone: fdinfo is a separate source and still tells who holds
    // the device open.
    for (const drm::ProcessClients& pc : scan.tally.processes_on(card.drm.pci_bus_id)) {
      core::GpuProcess p;
      p.pid = pc.pid;
      p.used_memory_mib = intel::process_memory_mib(pc);
      p.utilization_pct = usage_.process_utilization(card.drm.pci_bus_id, pc.pid);
      // fdinfo does not say whether a client draws or computes (compute runs on the render engine
      // of GPUs without compute engines), so every process is reported as Compute, as for amdgpu.
      p.kind = core::ProcessKind::Compute;
      g.processes.push_back(std::move(p));
    }
    // A card that vanished while being read would otherwise look like one that lacks some sensors.
    if (present && !intel::card_present(card)) intel::mark_gone(card, g, "disappeared while being read from");
    return g;
  }

  const core::Clock* clock_;
  std::string proc_root_;
  std::vector<intel::CardInfo> cards_;               // found once at open: GPUs are not hot-plugged in practice
  std::vector<std::optional<EnergySample>> energy_;  // by card
  intel::EngineUsage usage_;
  std::string driver_version_;
};

}  // namespace

Result<std::unique_ptr<Backend>> open_intel(const BackendOptions& opts) {
  try {
    auto cards = intel::discover_cards(opts.sysfs_root);
    if (cards.empty())
      return make_error("intel: no Intel GPU on i915 or xe under " +
                        platform::under_root(opts.sysfs_root, "/sys/class/drm"));
    // Both drivers are in-tree: the module has no version of its own (only a DKMS backport sets one).
    const std::string module = cards.front().driver == intel::Driver::Xe ? "xe" : "i915";
    std::string version =
        platform::read_line(platform::under_root(opts.sysfs_root, "/sys/module/" + module + "/version")).value_or("");
    return std::unique_ptr<Backend>(std::make_unique<IntelBackend>(opts, std::move(cards), std::move(version)));
  } catch (const std::exception& e) {
    return make_error(fmt::format("intel: cannot open: {}", e.what()));
  }
}

}  // namespace gf::backends
