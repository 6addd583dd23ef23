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

// More GPU instances on one GPU than any has (A100/H100: 7); bounds the states a broken driver could make
// us keep.
constexpr std::size_t kMaxGpuInstances = 32;

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
      if (gpu_instance_) {
        set_all(Absent::NotSupported, fmt::format("the driver does not {} for GPU instance {}", what, *gpu_instance_));
      } else if (mig) {
        set_all(Absent::MigEnabled, "in MIG mode NVML keeps GPM per GPU instance: see each MIG instance's profiling");
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

void GpmDevice::update(Clock::time_point now, std::chrono::milliseconds interval, bool mig, GpmMetricsGet& scratch) {
  if (interval.count() <= 0) {
    free_samples();
    set_all(Absent::NotQueried, "GPM sampling is off (--gpm-interval 0)");
  } else if (!has_gpm(api_)) {
    set_all(Absent::NotSupported, "this driver's NVML has no GPM functions (nvmlGpm*: NVIDIA driver R525 or later)");
  } else if (gpu_instance_ && api_.gpm_mig_sample_get == nullptr) {
    set_all(Absent::NotSupported, "this driver's NVML has no per-GPU-instance GPM (nvmlGpmMigSampleGet)");
  } else if (support_ != Support::No && due(now, due_, interval)) {
    step(now, interval, mig, scratch);
  }
}

void GpmDevice::fill(core::GpuReading& g) const {
  for (std::size_t i = 0; i < kGpmMetrics.size(); ++i) g.*kGpmMetrics[i].reading = last_[i];
  g.profiling_note = note_;
}

void GpmDevice::fill(core::MigInstance& m) const {
  for (std::size_t i = 0; i < kGpmMetrics.size(); ++i) m.*kGpmMetrics[i].mig_reading = last_[i];
  m.profiling_note = note_;
}

// Asks the parent whether it has GPM, once; false (the readings say why) when it has not or cannot say.
bool GpmDevice::ask_support(bool mig) {
  GpmSupport support{};
  support.version = kGpmSupportVersion;
  const Return r = api_.gpm_query_device_support(device_, &support);
  const bool answered_no = (r == kSuccess && support.is_supported_device == 0) || r == kErrorNotSupported ||
                           r == kErrorFunctionNotFound || r == kErrorArgumentVersionMismatch;
  if (answered_no) {
    if (mig && !gpu_instance_) {  // the parent of MIG instances may say no for now: ask again later
      fail("sample GPM", kErrorNotSupported, true);
      return false;
    }
    support_ = Support::No;  // probe once, then skip
    set_all(Absent::NotSupported, "no GPM on this GPU: NVML's profiling metrics need a Hopper or later GPU");
    return false;
  }
  if (r != kSuccess) {
    fail("ask the driver whether the GPU has GPM", r, mig);
    return false;
  }
  support_ = Support::Yes;
  return true;
}

Return GpmDevice::take_sample() {
  return gpu_instance_ ? api_.gpm_mig_sample_get(device_, *gpu_instance_, next_) : api_.gpm_sample_get(device_, next_);
}

void GpmDevice::step(Clock::time_point now, std::chrono::milliseconds interval, bool mig, GpmMetricsGet& scratch) {
  due_ = now + interval;  // failures are retried no sooner than samples are taken
  if (support_ == Support::Unknown && !ask_support(mig)) return;
  if (!allocate()) return;

  if (const Return r = take_sample(); r != kSuccess) {
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
  DeviceGpm& d = devices_[device];
  if (!d.whole) d.whole = std::make_unique<GpmDevice>(api_, device);
  const bool mig = g.mig_enabled.has_value() && *g.mig_enabled;
  d.whole->update(now, interval_, mig, *scratch_);
  d.whole->fill(g);
  if (!d.instances.empty() || !g.mig_instances.empty()) read_instances(device, now, d, g.mig_instances);
}

void GpmCollector::read_instances(Device device, Clock::time_point now, DeviceGpm& d,
                                  std::vector<core::MigInstance>& instances) {
  // The GPU instances listed now, in order of first appearance; each keeps its state when its identity
  // is the one sampled before, else starts afresh. States left in `d.instances` are dropped below: their
  // instances are gone (or re-created under the same id), and their samples go back to NVML.
  std::vector<GpmInstance> now_listed;
  now_listed.reserve(std::min<std::size_t>(instances.size(), kMaxGpuInstances));
  for (const auto& m : instances) {
    auto listed = [&](const GpmInstance& i) { return i.gpu_instance_id == m.gpu_instance_id; };
    if (std::any_of(now_listed.begin(), now_listed.end(), listed)) continue;
    if (now_listed.size() >= kMaxGpuInstances) break;
    std::string identity = m.profile + ' ' + m.uuid;
    auto old = std::find_if(d.instances.begin(), d.instances.end(), listed);
    if (old != d.instances.end() && old->gpm && old->identity == identity) {
      now_listed.push_back(std::move(*old));
    } else {
      now_listed.push_back(
          {m.gpu_instance_id, std::move(identity), std::make_unique<GpmDevice>(api_, device, m.gpu_instance_id)});
    }
    now_listed.back().gpm->update(now, interval_, true, *scratch_);
  }
  d.instances = std::move(now_listed);  // frees the samples of every instance not listed now
  for (auto& m : instances) {
    auto it = std::find_if(d.instances.begin(), d.instances.end(),
                           [&](const GpmInstance& i) { return i.gpu_instance_id == m.gpu_instance_id; });
    if (it != d.instances.end()) {
      it->gpm->fill(m);
    } else {
      for (const auto& slot : kGpmMetrics) m.*slot.mig_reading = core::Reading<double>::absent(Absent::Error);
      m.profiling_note = "more GPU instances than gpufleet samples";
    }
  }
}

}  // namespace gf::backends::nvml
