#include "node/agent.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <iterator>

#include "core/text.hpp"
#include "platform/log.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::node {
namespace {

// The store keeps milliseconds; the engine's clock has finer ticks: compare at the store's precision.
bool same_episode(const core::Alert& a, const core::Alert& b) {
  using std::chrono::floor;
  using std::chrono::milliseconds;
  return a.id == b.id && floor<milliseconds>(a.started_at) == floor<milliseconds>(b.started_at);
}

}  // namespace

Agent::Agent(sampler::Monitor& monitor, sampler::SampleHub& hub, std::unique_ptr<core::MetricHistory> history,
             std::unique_ptr<core::MetricHistory> history_reader, AgentOptions options, const core::Clock& clock)
    : monitor_(monitor),
      hub_(hub),
      history_(std::move(history)),
      history_reader_(std::move(history_reader)),
      options_(std::move(options)),
      clock_(clock),
      engine_(options_.alert_rules) {}

Agent::~Agent() { stop(); }

void Agent::start() {
  if (started_.exchange(true)) return;
  // Serve something from the first request on: the monitor's cached reading (auto-detection's probe)
  // or, failing that, a first query now.
  try {
    if (auto s = monitor_.snapshot(true)) publish(*s, clock_.now());
  } catch (...) {
    collection_failed("the first reading failed: " + core::current_exception_message(), clock_.now());
  }
  if (history_ && options_.writer_thread) writer_ = std::jthread([this](std::stop_token st) { writer(st); });
  sub_ = hub_.subscribe(
      options_.interval, [this](const Result<core::SnapshotPtr>& s, auto taken) { tick(s, taken); }, true);
}

void Agent::stop() {
  if (!started_.load() || stopped_.exchange(true)) return;
  sub_.reset();  // no tick runs after this
  if (writer_.joinable()) {
    writer_.request_stop();
    writer_cv_.notify_all();
    writer_.join();  // the writer flushes what is pending before it returns
  } else if (history_) {
    std::lock_guard lock(step_mu_);
    flush();  // no writer thread: what the last ticks collected is written here
  }
}

std::shared_ptr<const std::string> Agent::render(const core::Snapshot& s) const {
  auto j = wire::snapshot_json(s);
  j["node"] = options_.node_name;
  return std::make_shared<const std::string>(wire::dump_json(j));
}

const wire::ObjectText& Renderings::document() const {
  return once(document_, [&] {
    auto j = wire::snapshot_json(*snapshot_);
    j["node"] = node_;
    return wire::ObjectText(j);
  });
}

const Renderings::Text& Renderings::prometheus_gpus() const {
  return once(prometheus_, [&] {
    auto t = std::make_shared<std::string>();
    wire::write_prometheus_gpus(*t, *snapshot_, node_);
    return Text(std::move(t));
  });
}

const Renderings::Text& Renderings::document_gzip() const {
  return once(document_gzip_,
              [&] { return Text(std::make_shared<const std::string>(wire::gzip(*document().text()))); });
}

const std::shared_ptr<const wire::GzipHead>& Renderings::prometheus_gpus_gzip() const {
  return once(prometheus_gzip_,
              [&] { return std::make_shared<const wire::GzipHead>(wire::gzip_head(*prometheus_gpus())); });
}

const wire::ObjectText& Renderings::processes() const {
  return once(processes_, [&] {
    auto j = wire::processes_json(*snapshot_);
    j["node"] = node_;
    return wire::ObjectText(j);
  });
}

const wire::LiveMessagePtr& Renderings::status_message() const {
  return once(status_, [&] { return std::make_shared<const wire::LiveMessage>("gpu_status", document().text()); });
}

const wire::LiveMessagePtr& Renderings::update_message() const {
  return once(update_,
              [&] { return std::make_shared<const wire::LiveMessage>("gpu_status_update", document().text(), true); });
}

std::shared_ptr<const Renderings> Agent::renderings_of(const core::SnapshotPtr& s) {
  std::lock_guard lock(mu_);
  if (latest_ && latest_->snapshot == s) return latest_->renderings;
  if (!last_made_ || last_made_->snapshot() != s)
    last_made_ = std::make_shared<const Renderings>(s, options_.node_name);
  return last_made_;
}

void Agent::publish(core::SnapshotPtr snap, std::chrono::steady_clock::time_point taken) {
  auto p = std::make_shared<Published>();
  p->renderings = renderings_of(snap);
  p->snapshot = std::move(snap);
  p->taken = taken;
  std::lock_guard lock(mu_);
  p->sequence = ++sequence_;
  latest_ = std::move(p);
}

void Agent::tick(const Result<core::SnapshotPtr>& snap, std::chrono::steady_clock::time_point taken) {
  try {
    collect(snap, taken);
  } catch (...) {
    collection_failed("the collection threw: " + core::current_exception_message(), taken);
  }
}

void Agent::log(const std::string& message) const {
  if (options_.log)
    options_.log(message);
  else
    platform::log_line("agent", message);
}

void Agent::collection_failed(const std::string& message, std::chrono::steady_clock::time_point at) {
  std::string line;
  {
    std::lock_guard lock(mu_);
    ++counters_.collection_errors;
    counters_.last_error = message;
    counters_.last_failure = message;
    counters_.last_failure_wall = clock_.wall_now();
    counters_.last_query_duration = hub_.last_query_duration();
    if (failures_++ == 0) {
      failing_since_ = at;
      failing_cause_ = message;
      cause_change_logged_ = false;
      line = fmt::format("collection from the {} backend failed: {}", monitor_.backend_name(), message);
    } else if (message != failing_cause_) {
      // One more line when the cause changes (a timeout becoming a lost driver); later changes only
      // reach /api/health, so causes that carry a number or alternate cannot fill the log.
      if (!cause_change_logged_)
        line = fmt::format("collection from the {} backend still failing ({} in a row), now: {}",
                           monitor_.backend_name(), failures_, message);
      cause_change_logged_ = true;
      failing_cause_ = message;
    }
  }
  if (!line.empty()) log(line);
}

void Agent::collect(const Result<core::SnapshotPtr>& snap, std::chrono::steady_clock::time_point taken) {
  if (!snap) {
    collection_failed(snap.error().message, taken);
    return;
  }
  publish(*snap, taken);
  std::vector<core::AlertEvent> events;
  std::vector<AlertListener> listeners;
  std::string recovered;
  {
    std::lock_guard lock(mu_);
    ++counters_.collections;
    counters_.last_error.clear();
    counters_.last_success = taken;
    counters_.last_success_wall = (*snap)->timestamp;
    counters_.last_query_duration = hub_.last_query_duration();
    events = engine_.evaluate(**snap, taken);
    if (history_) {
      pending_samples_.push_back(*snap);
      pending_alerts_.insert(pending_alerts_.end(), events.begin(), events.end());
    }
    for (const auto& e : events) {
      if (e.type == core::AlertEvent::Type::Fired) {
        recent_.push_back(e.alert);
      } else {
        // The episode that started at the same time on the same rule and GPU ends.
        for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
          if (it->id == e.alert.id && it->started_at == e.alert.started_at) {
            *it = e.alert;
            break;
          }
      }
    }
    if (recent_.size() > options_.alert_history)
      recent_.erase(recent_.begin(),
                    recent_.begin() + static_cast<std::ptrdiff_t>(recent_.size() - options_.alert_history));
    if (!events.empty()) listeners = alert_listeners_;
    if (failures_ > 0) {  // the episode ends here: one line for it
      const double seconds = std::chrono::duration<double>(taken - failing_since_).count();
      recovered =
          fmt::format("collection from the {} backend recovered after {} failed {} / {:.1f} s", monitor_.backend_name(),
                      failures_, failures_ == 1 ? "collection" : "collections", std::max(seconds, 0.0));
      failures_ = 0;
      failing_cause_.clear();
    }
  }
  if (!recovered.empty()) log(recovered);
  for (const auto& l : listeners) {
    try {
      l(events);
    } catch (...) {  // one bad listener neither stops the others nor fails the collection
      platform::log_line("agent", "an alert listener threw: " + core::current_exception_message());
    }
  }
}

std::shared_ptr<const Published> Agent::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

Result<std::shared_ptr<const Published>> Agent::fresh() {
  std::unique_lock lock(fresh_mu_);
  if (fresh_running_) {
    const auto generation = fresh_generation_;
    fresh_cv_.wait(lock, [&] { return fresh_generation_ != generation; });
    return *fresh_last_;
  }
  if (fresh_last_ && clock_.now() - fresh_done_at_ < options_.fresh_reuse) return *fresh_last_;
  fresh_running_ = true;
  lock.unlock();
  auto got = query_fresh();  // never throws
  lock.lock();
  fresh_last_ = got;
  fresh_done_at_ = clock_.now();
  ++fresh_generation_;
  fresh_running_ = false;
  lock.unlock();
  fresh_cv_.notify_all();
  return got;
}

Result<std::shared_ptr<const Published>> Agent::query_fresh() {
  try {
    auto s = monitor_.snapshot(false);
    if (!s) return s.error();
    auto p = std::make_shared<Published>();
    p->renderings = renderings_of(*s);
    p->snapshot = std::move(*s);
    p->taken = clock_.now();
    std::lock_guard lock(mu_);
    p->sequence = ++sequence_;
    latest_ = p;
    return std::shared_ptr<const Published>(std::move(p));
  } catch (...) {
    return make_error("the backend (" + monitor_.backend_name() + ") threw: " + core::current_exception_message());
  }
}

std::vector<core::Alert> Agent::firing() const {
  std::lock_guard lock(mu_);
  return engine_.firing();
}

Result<std::vector<core::Alert>> Agent::recent_alerts(const core::AlertQuery& q) {
  const std::size_t limit = q.limit;
  if (history_reader_) {
    std::lock_guard lock(reader_mu_);
    auto stored = history_reader_->recent_alerts(q);
    if (!stored) return stored.error();
    // Episodes not written yet (the current batch) come from memory.
    std::vector<core::Alert> out;
    {
      std::lock_guard l(mu_);
      for (auto it = recent_.rbegin(); it != recent_.rend() && out.size() < limit; ++it) {
        if (!q.matches(*it)) continue;
        const bool in_store =
            std::any_of(stored->begin(), stored->end(), [&](const core::Alert& a) { return same_episode(a, *it); });
        if (!in_store) out.push_back(*it);
      }
    }
    for (auto& a : *stored) {
      // The in-memory copy is newer (resolved, not yet written) when both have it.
      std::lock_guard l(mu_);
      for (const auto& m : recent_)
        if (same_episode(m, a)) a = m;
    }
    // A copy from memory may have resolved before q's range.
    std::copy_if(stored->begin(), stored->end(), std::back_inserter(out),
                 [&](const core::Alert& a) { return q.matches(a); });
    std::stable_sort(out.begin(), out.end(),
                     [](const core::Alert& a, const core::Alert& b) { return a.started_at > b.started_at; });
    if (out.size() > limit) out.resize(limit);
    return out;
  }
  std::lock_guard lock(mu_);
  std::vector<core::Alert> out;
  for (auto it = recent_.rbegin(); it != recent_.rend() && out.size() < limit; ++it)
    if (q.matches(*it)) out.push_back(*it);
  return out;
}

std::vector<core::Alert> Agent::firing(const core::AlertQuery& q) const {
  std::vector<core::Alert> out;
  for (auto& a : firing())
    if (q.matches(a)) out.push_back(std::move(a));
  return out;
}

Result<std::vector<core::HistoryPoint>> Agent::history(unsigned gpu, core::Field field,
                                                       std::chrono::system_clock::time_point since,
                                                       std::chrono::system_clock::time_point until,
                                                       std::chrono::seconds step) {
  if (!history_reader_) return make_error("this agent keeps no history (started with --no-history)");
  std::lock_guard lock(reader_mu_);
  return history_reader_->query(gpu, field, since, until, step);
}

std::string Agent::history_path() const { return history_reader_ ? history_reader_->location() : std::string(); }

AgentCounters Agent::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void Agent::on_alerts(AlertListener l) {
  std::lock_guard lock(mu_);
  alert_listeners_.push_back(std::move(l));
}

bool Agent::flush() {
  std::vector<core::SnapshotPtr> samples;
  std::vector<core::AlertEvent> alerts;
  {
    std::lock_guard lock(mu_);
    samples.swap(pending_samples_);
    alerts.swap(pending_alerts_);
  }
  if (samples.empty() && alerts.empty()) return false;
  // One transaction each: a crash loses at most this batch.
  auto r = history_->append_batch(samples);
  Result<void> a = r ? history_->record_alerts(alerts) : Result<void>();
  std::lock_guard lock(mu_);
  if (!r || !a) {
    ++counters_.history_errors;
    counters_.history_error = !r ? r.error().message : a.error().message;
    // Keep the batch for the next try, within a bound: a store that stays broken must not eat memory.
    constexpr std::size_t kMaxPending = 3600;
    if (!r && samples.size() + pending_samples_.size() <= kMaxPending)
      pending_samples_.insert(pending_samples_.begin(), samples.begin(), samples.end());
    if (alerts.size() + pending_alerts_.size() <= kMaxPending)
      pending_alerts_.insert(pending_alerts_.begin(), alerts.begin(), alerts.end());
  } else {
    ++counters_.history_batches;
    counters_.history_error.clear();
  }
  return true;
}

HistoryStep Agent::step_history(std::chrono::steady_clock::time_point now) {
  HistoryStep done;
  done.next_due = now + options_.history_flush;
  if (!history_) return done;
  std::lock_guard lock(step_mu_);
  if (!next_flush_ || now >= *next_flush_) {
    done.flushed = flush();
    next_flush_ = now + options_.history_flush;
  }
  if (!next_maintain_ || now >= *next_maintain_) {
    if (auto r = history_->maintain(clock_.wall_now()); !r) {
      std::lock_guard l(mu_);
      ++counters_.history_errors;
      counters_.history_error = r.error().message;
    }
    done.maintained = true;
    next_maintain_ = now + options_.history_maintain;
  }
  done.next_due = std::min(*next_flush_, *next_maintain_);
  return done;
}

void Agent::writer(std::stop_token stop) {
  std::mutex m;
  std::unique_lock lock(m);
  // The first round comes one flush interval after start, like every later one.
  auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.history_flush);
  while (!stop.stop_requested()) {
    writer_cv_.wait_for(lock, stop, wait, [] { return false; });
    if (stop.stop_requested()) break;
    const auto now = clock_.now();
    const auto step = step_history(now);
    wait = std::max<std::chrono::nanoseconds>(step.next_due - now, std::chrono::milliseconds(1));
  }
  std::lock_guard l(step_mu_);
  flush();  // shutdown: what the last ticks collected
}

}  // namespace gf::node
