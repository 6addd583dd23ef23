// The fake NVML's GPM (GPU performance monitoring) entry points, on the scenario state, GPU objects and
// call wrappers of fake_nvml.hpp. Only in the current-driver build: the old-driver fake has no GPM, like
// a driver from before R525. See tests/fakes/README.md ("GPM").
//
// Samples are validated as NVML does: a sample handle is one nvmlGpmSampleAlloc gave and did not free;
// a metrics call needs two distinct samples, both filled by nvmlGpmSampleGet, of the same GPU (or both
// by nvmlGpmMigSampleGet, of the same GPU instance), sample1 taken before sample2.
#include <time.h>

#include <set>

#include "fake_nvml.hpp"

namespace {

using namespace fake_nvml;

constexpr unsigned kFakeGpmVersion = 1;      // NVML_GPM_SUPPORT_VERSION and NVML_GPM_METRICS_GET_VERSION
constexpr unsigned kFakeGpmMetricMax = 333;  // NVML_GPM_METRIC_MAX in CUDA 13's nvml.h

constexpr long long kWholeGpu = -1;  // nvmlGpmSample_st::gpu_instance of a whole-GPU sample

struct nvmlGpmSample_st {
  bool filled = false;                 // nvmlGpmSampleGet or nvmlGpmMigSampleGet has written it
  unsigned gpu = 0;                    // whose counters it holds
  long long gpu_instance = kWholeGpu;  // the MIG GPU instance it holds, or the whole GPU
  unsigned long long sequence = 0;
};
typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName, *longName, *unit;
  } metricInfo;
} FakeGpmMetric;
typedef struct {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_st* sample1;
  nvmlGpmSample_st* sample2;
  FakeGpmMetric metrics[kFakeGpmMetricMax];
} FakeGpmMetricsGet;
typedef struct {
  unsigned int version;
  unsigned int isSupportedDevice;
} FakeGpmSupport;
static_assert(sizeof(FakeGpmMetric) == 40 && sizeof(FakeGpmMetricsGet) == 24 + 333 * 40);

// Live samples (allocated, not freed); guarded by State::mu like everything else.
struct GpmState {
  std::set<nvmlGpmSample_st*> live;
  unsigned long long sequence = 0;
};
GpmState& gpm_state() {
  static GpmState s;
  return s;
}

// The scenario's "gpm_call_cost_us": {"nvmlGpmSampleGet": 77, …}: the call spins for that much CPU time
// before it answers, so a benchmark sees the CPU a real driver would take. Read under the lock, spun outside it.
[[maybe_unused]] void spend_call_cost(const char* fn) {
  long long us = 0;
  {
    State& s = state();
    std::lock_guard lock(s.mu);
    auto it = s.gpm_cost_us.find(fn);
    if (it != s.gpm_cost_us.end()) us = it->second;
  }
  if (us <= 0) return;
  // On the thread's CPU clock, not the wall clock: on a busy machine a wall-clock spin is descheduled
  // part of the time and would cost less CPU than the real call.
  auto cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
  };
  const long long until = cpu_ns() + us * 1000;
  while (cpu_ns() < until) {
  }
}

[[maybe_unused]] bool live_sample(nvmlGpmSample_st* sample) {
  return sample != nullptr && gpm_state().live.count(sample) > 0;
}

// One metric of a metrics call: the scenario's "gpm_metrics" entry for its id, stepped per call.
[[maybe_unused]] void compute_metric(Gpu& g, FakeGpmMetric& m) {
  m.metricInfo = {nullptr, nullptr, nullptr};
  m.value = 0;
  if (m.metricId == 0 || m.metricId >= kFakeGpmMetricMax) {
    m.nvmlReturn = kInvalidArgument;
    return;
  }
  const std::string id = std::to_string(m.metricId);
  const json metrics = g.spec.value("gpm_metrics", json::object());
  if (!metrics.is_object() || !metrics.contains(id)) {
    m.nvmlReturn = kNotSupported;
    return;
  }
  const Answer a = resolve(metrics.at(id), g.cursor["gpm_metrics." + id]++, g.mode, false);
  m.nvmlReturn = a.code;
  if (a.code == kSuccess) m.value = as_double(a.value);
}

// The MIG device of `parent` in GPU instance `gpu_instance_id` (its first, by MIG index); null when none.
[[maybe_unused]] Gpu* mig_device_in(Gpu& parent, unsigned gpu_instance_id) {
  for (auto& m : parent.mig_devices)
    if (m && m->spec.contains("gpu_instance_id") && as_u64(m->spec.at("gpu_instance_id")) == gpu_instance_id)
      return m.get();
  return nullptr;
}

}  // namespace

extern "C" {

#if !FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t dev, FakeGpmSupport* support) {
  return device_call("nvmlGpmQueryDeviceSupport", dev, [&](Gpu& g) {
    if (support == nullptr) return kInvalidArgument;
    if (support->version != kFakeGpmVersion) return kArgumentVersionMismatch;
    Answer a = g.take_or("gpm_supported", false);
    if (a.code != kSuccess) return a.code;
    support->isSupportedDevice = a.value.is_boolean() && a.value.get<bool>() ? 1 : 0;
    return kSuccess;
  });
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_st** sample) {
  return system_call("nvmlGpmSampleAlloc", [&](State&) {
    if (sample == nullptr) return kInvalidArgument;
    *sample = new nvmlGpmSample_st();
    gpm_state().live.insert(*sample);
    return kSuccess;
  });
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_st* sample) {
  return system_call("nvmlGpmSampleFree", [&](State&) {
    if (sample == nullptr) return kSuccess;
    if (!live_sample(sample)) return kInvalidArgument;  // a stray pointer, or freed twice
    gpm_state().live.erase(sample);
    delete sample;
    return kSuccess;
  });
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t dev, nvmlGpmSample_st* sample) {
  spend_call_cost("nvmlGpmSampleGet");
  return device_call("nvmlGpmSampleGet", dev, [&](Gpu& g) {
    if (!live_sample(sample)) return kInvalidArgument;
    Answer supported = g.take_or("gpm_supported", false);
    if (supported.code != kSuccess) return supported.code;
    if (!supported.value.is_boolean() || !supported.value.get<bool>()) return kNotSupported;
    Answer a = g.take_or("gpm_sample_get", true);  // {"error": N} makes this sample fail
    if (a.code != kSuccess) return a.code;
    sample->filled = true;
    sample->gpu = g.index;
    sample->gpu_instance = kWholeGpu;
    sample->sequence = ++gpm_state().sequence;
    return kSuccess;
  });
}

// On the PARENT's handle, as NVML takes it (a MIG device handle is INVALID_ARGUMENT here). The parent's
// "gpm_supported" says whether the GPU has GPM at all; the instance's own MIG device entry (the first
// with that "gpu_instance_id") holds "gpm_supported" (default true), "gpm_sample_get" and "gpm_metrics".
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t dev, unsigned int gpuInstanceId, nvmlGpmSample_st* sample) {
  spend_call_cost("nvmlGpmMigSampleGet");
  return device_call("nvmlGpmMigSampleGet", dev, [&](Gpu& g) {
    if (!live_sample(sample) || g.parent != nullptr) return kInvalidArgument;
    Answer supported = g.take_or("gpm_supported", false);
    if (supported.code != kSuccess) return supported.code;
    if (!supported.value.is_boolean() || !supported.value.get<bool>()) return kNotSupported;
    Gpu* instance = mig_device_in(g, gpuInstanceId);
    if (instance == nullptr) return kInvalidArgument;  // no such GPU instance (now)
    Answer own = instance->take_or("gpm_supported", true);
    if (own.code != kSuccess) return own.code;
    if (!own.value.is_boolean() || !own.value.get<bool>()) return kNotSupported;
    Answer a = instance->take_or("gpm_sample_get", true);
    if (a.code != kSuccess) return a.code;
    sample->filled = true;
    sample->gpu = g.index;
    sample->gpu_instance = gpuInstanceId;
    sample->sequence = ++gpm_state().sequence;
    return kSuccess;
  });
}

nvmlReturn_t nvmlGpmMetricsGet(FakeGpmMetricsGet* request) {
  spend_call_cost("nvmlGpmMetricsGet");
  return system_call("nvmlGpmMetricsGet", [&](State& s) {
    if (request == nullptr) return kInvalidArgument;
    if (request->version != kFakeGpmVersion) return kArgumentVersionMismatch;
    if (request->numMetrics == 0 || request->numMetrics > kFakeGpmMetricMax) return kInvalidArgument;
    nvmlGpmSample_st* a = request->sample1;
    nvmlGpmSample_st* b = request->sample2;
    if (!live_sample(a) || !live_sample(b) || a == b || !a->filled || !b->filled) return kInvalidArgument;
    // Both samples of one GPU, or of one GPU instance of it: never a pair across instances.
    if (a->gpu != b->gpu || a->gpu_instance != b->gpu_instance || a->sequence >= b->sequence || a->gpu >= s.gpus.size())
      return kInvalidArgument;
    Gpu& g = *s.gpus[a->gpu];
    if (g.lost) return kGpuIsLost;
    Gpu* source = &g;
    if (a->gpu_instance != kWholeGpu) {
      source = mig_device_in(g, static_cast<unsigned>(a->gpu_instance));
      if (source == nullptr) return kInvalidArgument;
    }
    for (unsigned i = 0; i < request->numMetrics; ++i) compute_metric(*source, request->metrics[i]);
    return kSuccess;
  });
}
#endif

// Test hook: samples allocated and not yet freed.
unsigned long long fake_nvml_gpm_live_samples(void) {
  State& s = state();
  std::lock_guard lock(s.mu);
  return gpm_state().live.size();
}

}  // extern "C"
