#pragma once
// Sampler: samples the GPUs while a job runs and summarises what they did (core::RunReport).
// Several samplers share the hub's one collection loop. Thread-safe.
#include <chrono>
#include <mutex>
#include <vector>

#include "core/stats.hpp"
#include "sampler/hub.hpp"

namespace gf::sampler {

class Sampler {
 public:
  static constexpr std::chrono::milliseconds kMinInterval{50};
  static constexpr std::chrono::milliseconds kMaxInterval{60000};

  // gpus: the indices to report (empty: all). Fails when the interval is outside [50 ms, 60 s].
  static Result<std::unique_ptr<Sampler>> create(SampleHub& hub, std::chrono::milliseconds interval,
                                                 std::vector<unsigned> gpus = {});
  ~Sampler() { stop(); }

  // Takes the first sample at once, with fresh counters (SampleHub::query_fresh), then one every interval.
  void start();
  // Stops sampling, takes a last sample with fresh counters (once, when started), and returns the
  // statistics (also when called twice: the same report).
  core::RunReport stop();
  std::size_t sample_count() const;
  std::size_t failed_queries() const;

 private:
  Sampler(SampleHub& hub, std::chrono::milliseconds interval, std::vector<unsigned> gpus);

  bool add_fresh();  // true when the sample was taken (not a failed query)
  void add_locked(const Result<core::SnapshotPtr>& s, SampleHub::TimePoint at);

  SampleHub& hub_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  core::RunAggregator agg_;
  std::size_t failed_ = 0;
  bool started_ = false;    // start() was called: stop() takes a last sample
  bool stopped_ = false;    // stop() took it (a second stop() does not)
  bool skip_next_ = false;  // the subscription's first call, which start()'s own sample stands for
  SampleHub::Subscription sub_;
};

}  // namespace gf::sampler
