#include "backends/nvml/nvml_events.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <map>

#include "core/gpu_health.hpp"

namespace gf::backends::nvml {
namespace {

core::Absent absent_for(Return r) {
  switch (r) {
    case kErrorNotSupported:
    case kErrorFunctionNotFound: return core::Absent::NotSupported;
    case kErrorNoPermission: return core::Absent::NoPermission;
    case kErrorGpuIsLost: return core::Absent::GpuLost;
    default: return core::Absent::Error;
  }
}

}  // namespace

XidEvents::XidEvents(const Api& api, const core::Clock& clock, EventOptions options)
    : api_(api), clock_(clock), options_(options) {
  options_.recent_limit = std::max<std::size_t>(options_.recent_limit, 1);
}

XidEvents::~XidEvents() { stop(); }

void XidEvents::start(const std::vector<Device>& devices) {
  std::map<Return, std::vector<std::size_t>> failures;  // NVML's answer → the GPUs that gave it
  const bool have_api = api_.event_set_create && api_.register_events && api_.event_set_wait && api_.event_set_free;
  {
    std::lock_guard lock(mu_);
    for (Device d : devices)
      if (d) gpus_[d] = PerGpu{};
  }
  if (!have_api) return;  // an old driver: every GPU's last_xid is absent, "not supported"
  if (const Return r = api_.event_set_create(&set_); r != kSuccess || set_ == nullptr) {
    set_ = nullptr;
    problem_ = fmt::format("XID events are not reported: cannot create an NVML event set: {}", describe(api_, r));
    std::lock_guard lock(mu_);
    for (auto& [d, g] : gpus_) g.why = absent_for(r);
    return;
  }
  bool any = false;
  bool no_permission = false;
  for (std::size_t index = 0; index < devices.size(); ++index) {
    Device d = devices[index];
    if (!d) continue;
    unsigned long long supported = 0;
    Return r = api_.supported_event_types ? api_.supported_event_types(d, &supported) : kErrorFunctionNotFound;
    // Without the query, try the registration itself: it answers NOT_SUPPORTED where XIDs are not.
    if (r == kErrorFunctionNotFound) supported = kEventTypeXidCriticalError, r = kSuccess;
    if (r == kSuccess && (supported & kEventTypeXidCriticalError) == 0) r = kErrorNotSupported;
    if (r == kSuccess) r = api_.register_events(d, kEventTypeXidCriticalError, set_);
    std::lock_guard lock(mu_);
    PerGpu& g = gpus_[d];
    if (r == kSuccess) {
      g.registered = true;
      any = true;
    } else {
      g.why = absent_for(r);
      no_permission = no_permission || r == kErrorNoPermission;
      // NOT_SUPPORTED is what the GPU is (its last_xid says so), not a problem to report.
      if (g.why != core::Absent::NotSupported) failures[r].push_back(index);
    }
  }
  if (!failures.empty()) {
    // One clause per distinct answer, so eight GPUs that all say "no permission" make one short line.
    std::vector<std::string> parts;
    for (const auto& [code, gpus] : failures)
      parts.push_back(fmt::format("GPU {}: {}", fmt::join(gpus, ","), describe(api_, code)));
    problem_ = fmt::format("XID events are not reported ({}){}", fmt::join(parts, "; "),
                           no_permission ? "; registering for NVML events needs root" : "");
  }
  if (!any) {
    api_.event_set_free(set_);
    set_ = nullptr;
    return;
  }
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
}

void XidEvents::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();  // within one wait_timeout
  }
  if (set_ != nullptr) {
    api_.event_set_free(set_);
    set_ = nullptr;
  }
}

void XidEvents::run(std::stop_token stop) {
  const auto timeout = static_cast<unsigned>(std::clamp<long long>(options_.wait_timeout.count(), 1, 60000));
  std::mutex pause_mu;
  std::condition_variable_any pause;
  while (!stop.stop_requested()) {
    EventData data{};
    const Return r = api_.event_set_wait(set_, &data, timeout);
    if (r == kSuccess) {
      if ((data.event_type & kEventTypeXidCriticalError) != 0)
        record(data.device, static_cast<unsigned>(std::min<unsigned long long>(data.event_data, UINT_MAX)));
      continue;
    }
    if (r == kErrorTimeout) continue;
    {
      std::lock_guard lock(mu_);
      ++wait_errors_;
    }
    // Anything else (a GPU lost, the driver in trouble): wait before asking again, promptly stoppable.
    std::unique_lock lock(pause_mu);
    pause.wait_for(lock, stop, options_.error_backoff, [] { return false; });
  }
}

void XidEvents::record(Device device, unsigned xid) {
  const auto now = clock_.wall_now();
  std::lock_guard lock(mu_);
  auto it = gpus_.find(device);
  if (it == gpus_.end()) return;  // not one of ours (a handle NVML made up): nothing to attribute it to
  PerGpu& g = it->second;
  g.last_xid = xid;
  ++g.count;
  g.recent.push_back({xid, now});
  if (g.recent.size() <= options_.recent_limit) return;
  // Evict the oldest application fault; only when every entry is critical, the oldest critical one.
  auto victim = std::find_if(g.recent.begin(), g.recent.end(),
                             [](const core::XidEvent& e) { return !core::xid_needs_reset(e.xid); });
  g.recent.erase(victim != g.recent.end() ? victim : g.recent.begin());
}

void XidEvents::fill(Device device, core::GpuReading& g) const {
  std::lock_guard lock(mu_);
  auto it = gpus_.find(device);
  if (it == gpus_.end()) {
    g.last_xid = core::Reading<unsigned>::absent(core::Absent::NotSupported);
    return;
  }
  const PerGpu& p = it->second;
  if (!p.registered) {
    g.last_xid = core::Reading<unsigned>::absent(p.why);
    return;
  }
  g.last_xid = p.last_xid;
  g.recent_xids.assign(p.recent.begin(), p.recent.end());
}

std::uint64_t XidEvents::count(Device device) const {
  std::lock_guard lock(mu_);
  auto it = gpus_.find(device);
  return it == gpus_.end() ? 0 : it->second.count;
}

std::string XidEvents::problem() const { return problem_; }

std::chrono::nanoseconds XidEvents::cpu_time() const {
  if (!thread_.joinable()) return std::chrono::nanoseconds{0};
  clockid_t id{};
  // jthread's native handle is a pthread_t on glibc.
  if (pthread_getcpuclockid(const_cast<std::jthread&>(thread_).native_handle(), &id) != 0)
    return std::chrono::nanoseconds{0};
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return std::chrono::nanoseconds{0};
  return std::chrono::seconds{ts.tv_sec} + std::chrono::nanoseconds{ts.tv_nsec};
}

}  // namespace gf::backends::nvml
