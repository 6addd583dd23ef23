#include "backends/nvml/nvml_gpm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace gf::backends::nvml {
namespace {

using core::Absent;
using Clock = std::chrono::steady_clock;

bool has_gpm(const Api& api) {
  return api.gpm_query_device_support && api.gpm_sample_alloc && api.gpm_sample_free && api.gpm_sample_get &&
         api.gpm_metrics_get;
}

std::string seconds(std::chrono::milliseconds d) { return fmt::format("{:g} s", static_cast<double>(d.count()) / 1e3); }

// A sample is due a little early rather than a whole collection late: collections jitter, and a
// 1 s interval at 1 Hz must sample on every collection, not every other one. NVML wants more than
// 100 ms between samples; the shortest interval (200 ms) less this slack keeps to that.
bool due(Clock::time_point now, Clock::time_point at, std::chrono::milliseconds interval) {
  return now + interval / 10 >= at;
}

}  // namespace

GpmDevice::~GpmDevice() { free_samples(); }

void GpmDevice::free_samples() {
  for (GpmSample* s : {&previous_, &next_}) {
    if (*s != nullptr && api_.gpm_sample_free) api_.gpm_sample_free(*s);
    *s = nullptr;
  }
  have_previous_ = false;
}

bool GpmDevice::allocate() {
  if (previous_ != nullptr && next_ != nullptr) return true;
  for (GpmSample* s : {&previous_, &next_}) {
    if (*s != nullptr) continue;
    if (const Return r = api_.gpm_sample_alloc(s); r != kSuccess || *s == nullptr) {
      *s = nullptr;
      set_all(Absent::Error, fmt::format("cannot allocate GPM samples: {}", describe(api_, r)));
      return false;
    }
  }
  return true;
}

void GpmDevice::set_all(Absent why, std::string note) {
  for (auto& r : last_) r = core::Reading<double>::absent(why);
  note_ = std::move(note);
}

void GpmDevice::fail(const char* what, Return code, bool mig) {
  switch (code) {
    case kErrorNotSupported:
      if (mig) {
        set_all(Absent::MigEnabled,
                "in MIG mode NVML keeps GPM per GPU instance; gpufleet reports no per-instance profiling yet");
      } else {
        set_all(Absent::NotSupported, fmt::format("the driver does not {} on this GPU", what));
      }
      return;
    case kErrorNoPermission:
      set_all(Absent::NoPermission, fmt::format("cannot {}: {}", what, describe(api_, code)));
      return;
    case kErrorGpuIsLost: set_all(Absent::GpuLost, fmt::format("cannot {}: {}", what, describe(api_, code))); return;
    default: set_all(Absent::Error, fmt::format("cannot {}: {}", what, describe(api_, code))); return;
  }
}

void GpmDevice::read(Clock::time_point now, std::chrono::milliseconds interval, bool mig, GpmMetricsGet& scratch,
                     core::GpuReading& g) {
  if (interval.count() <= 0) {
    free_samples();
    set_all(Absent::NotQueried, "GPM sampling is off (--gpm-interval 0)");
  } else if (!has_gpm(api_)) {
    set_all(Absent::NotSupported, "this driver's NVML has no GPM functions (nvmlGpm*: NVIDIA driver R525 or later)");
  } else if (support_ != Support::No && due(now, due_, interval)) {
    step(now, interval, mig, scratch);
  }
  for (std::size_t i = 0; i < kGpmMetrics.size(); ++i) g.*kGpmMetrics[i].reading = last_[i];
  g.profiling_note = note_;
}

void GpmDevice::step(Clock::time_point now, std::chrono::milliseconds interval, bool mig, GpmMetricsGet& scratch) {
  due_ = now + interval;  // failures are retried no sooner than samples are taken
  if (support_ == Support::Unknown) {
    GpmSupport support{};
    support.version = kGpmSupportVersion;
    const Return r = api_.gpm_query_device_support(device_, &support);
    const bool answered_no = (r == kSuccess && support.is_supported_device == 0) || r == kErrorNotSupported ||
                             r == kErrorFunctionNotFound || r == kErrorArgumentVersionMismatch;
    if (answered_no) {
      if (mig) {  // the parent of MIG instances may say no for now: ask again later
        fail("sample GPM", kErrorNotSupported, true);
        return;
      }
      support_ = Support::No;  // probe once, then skip
      set_all(Absent::NotSupported, "no GPM on this GPU: NVML's profiling metrics need a Hopper or later GPU");
      return;
    }
    if (r != kSuccess) {
      fail("ask the driver whether the GPU has GPM", r, mig);
      return;
    }
    support_ = Support::Yes;
  }
  if (!allocate()) return;

  if (const Return r = api_.gpm_sample_get(device_, next_); r != kSuccess) {
    fail("take a GPM sample", r, mig);  // the previous sample stays: the next readings span the gap
    return;
  }
  if (!have_previous_) {
    std::swap(previous_, next_);
    have_previous_ = true;
    set_all(Absent::Unavailable, fmt::format("first GPM sample taken: readings average the time between two samples "
                                             "and start with the next one, {} later",
                                             seconds(interval)));
    return;
  }

  scratch.version = kGpmMetricsGetVersion;
  scratch.num_metrics = static_cast<unsigned>(kGpmMetrics.size());
  scratch.sample1 = previous_;
  scratch.sample2 = next_;
  for (std::size_t i = 0; i < kGpmMetrics.size(); ++i) {
    std::memset(&scratch.metrics[i], 0, sizeof scratch.metrics[i]);
    scratch.metrics[i].metric_id = kGpmMetrics[i].metric_id;
  }
  const Return r = api_.gpm_metrics_get(&scratch);
  std::swap(previous_, next_);  // the new sample is the start of the next span, whatever the metrics said
  if (r != kSuccess) {
    fail("compute GPM metrics", r, mig);
    return;
  }
  bool any = false;
  for (std::size_t i = 0; i < kGpmMetrics.size(); ++i) {
    const GpmMetric& m = scratch.metrics[i];
    const GpmMetricSlot& slot = kGpmMetrics[i];
    if (m.metric_id != slot.metric_id) {  // the driver must not reorder; if it did, trust nothing
      last_[i] = core::Reading<double>::absent(Absent::Error);
    } else if (m.nvml_return == kErrorNotSupported) {
      last_[i] = core::Reading<double>::absent(Absent::NotSupported);
    } else if (m.nvml_return != kSuccess) {
      last_[i] = core::Reading<double>::absent(Absent::Error);
    } else if (!std::isfinite(m.value)) {
      last_[i] = core::Reading<double>::absent(Absent::Unavailable);  // never a NaN in a document
    } else {
      const double v = std::max(0.0, m.value * slot.scale);
      last_[i] = slot.ratio ? std::min(v, 1.0) : v;
      any = true;
    }
  }
  note_ = any ? std::string() : "the driver computed none of the GPM metrics for this GPU";
}

GpmCollector::GpmCollector(const Api& api, std::chrono::milliseconds interval)
    : api_(api), interval_(interval), scratch_(std::make_unique<GpmMetricsGet>()) {}

GpmCollector::~GpmCollector() = default;

void GpmCollector::read(Device device, Clock::time_point now, core::GpuReading& g) {
  auto& slot = devices_[device];
  if (!slot) slot = std::make_unique<GpmDevice>(api_, device);
  const bool mig = g.mig_enabled.has_value() && *g.mig_enabled;
  slot->read(now, interval_, mig, *scratch_, g);
}

}  // namespace gf::backends::nvml
