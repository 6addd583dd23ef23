#include "sampler/sampler.hpp"

#include <utility>

namespace gf::sampler {

Result<std::unique_ptr<Sampler>> Sampler::create(SampleHub& hub, std::chrono::milliseconds interval,
                                                 std::vector<unsigned> gpus) {
  if (interval < kMinInterval || interval > kMaxInterval)
    return make_error("sampling interval must be between 0.05 s and 60 s (got " +
                      std::to_string(static_cast<double>(interval.count()) / 1000.0) + " s)");
  return std::unique_ptr<Sampler>(new Sampler(hub, interval, std::move(gpus)));
}

Sampler::Sampler(SampleHub& hub, std::chrono::milliseconds interval, std::vector<unsigned> gpus)
    : hub_(hub), interval_(interval) {
  agg_.set_gpu_filter(std::move(gpus));
}

bool Sampler::add_fresh() {
  SampleHub::TimePoint at{};
  auto s = hub_.query_fresh(at);
  std::lock_guard l(mu_);
  add_locked(s, at);
  return s.has_value();
}

void Sampler::add_locked(const Result<core::SnapshotPtr>& s, SampleHub::TimePoint at) {
  if (s)
    agg_.add(**s, at);
  else
    ++failed_;
}

void Sampler::start() {
  // The first sample reads the energy counter afresh (the NVML backend reads it every 30 s otherwise), so that
  // the report's counter energy starts at the job's start; the subscription's own first call, which comes
  // at once, is skipped — unless the fresh one failed: then that first call is the job's first sample.
  const bool first_taken = add_fresh();
  // Subscribe and swap outside mu_: the listener takes mu_, and dropping an old subscription waits
  // for a delivery in flight.
  {
    std::lock_guard lock(mu_);
    skip_next_ = first_taken;
    started_ = true;
    stopped_ = false;
  }
  auto sub = hub_.subscribe(interval_, [this](const Result<core::SnapshotPtr>& s, SampleHub::TimePoint at) {
    std::lock_guard l(mu_);
    if (std::exchange(skip_next_, false)) return;
    add_locked(s, at);
  });
  SampleHub::Subscription old;
  std::lock_guard lock(mu_);
  old = std::move(sub_);
  sub_ = std::move(sub);
}

core::RunReport Sampler::stop() {
  SampleHub::Subscription sub;
  bool last = false;
  {
    std::lock_guard lock(mu_);
    sub = std::move(sub_);
    last = started_ && !std::exchange(stopped_, true);
  }
  sub.reset();  // outside mu_: the listener takes mu_
  // The last sample reads the energy counter afresh too: the counter energy ends at the job's end.
  if (last) add_fresh();
  std::lock_guard lock(mu_);
  return agg_.report();
}

std::size_t Sampler::sample_count() const {
  std::lock_guard lock(mu_);
  return agg_.sample_count();
}

std::size_t Sampler::failed_queries() const {
  std::lock_guard lock(mu_);
  return failed_;
}

}  // namespace gf::sampler
