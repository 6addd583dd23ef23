#include "node/usage_ledger.hpp"

#include <algorithm>

#include "platform/log.hpp"

namespace gf::node {

namespace {

void add_to(core::UsageTotals& t, const core::LeaseUsage& r) {
  t.key = r.user;
  t.add(r);
}

}  // namespace

UsageLedger::UsageLedger(std::unique_ptr<core::UsageStore> store, LeaseSource source, Warn warn, Release release,
                         LedgerOptions options, const core::Clock& clock)
    : store_(std::move(store)),
      source_(std::move(source)),
      warn_(std::move(warn)),
      release_(std::move(release)),
      options_(options),
      clock_(clock),
      acc_(options.usage),
      policy_(options.reclaim) {}

UsageLedger::~UsageLedger() = default;

Result<void> UsageLedger::load() {
  std::lock_guard lock(mu_);
  auto totals = store_->final_totals_by_user();
  if (!totals) return with_context("cannot read the usage totals: ", totals.error());
  final_by_user_ = std::move(*totals);
  auto open = store_->unfinished();
  if (!open) return with_context("cannot read the running usage rows: ", open.error());
  for (auto& r : *open) acc_.seed(std::move(r));
  return {};
}

void UsageLedger::note_error(const std::string& what) {
  std::lock_guard lock(mu_);
  if (what == last_error_) return;  // log a failure once, not at every collection
  last_error_ = what;
  platform::log_line("usage", what);
}

void UsageLedger::observe(const core::Snapshot& snapshot) {
  const std::int64_t now = core::to_epoch_ms(snapshot.timestamp);
  auto active = source_.active ? source_.active() : Result<std::vector<core::Lease>>(std::vector<core::Lease>{});
  if (!active) return note_error("cannot read the active leases: " + active.error().message);

  // Leases that left the active list since the last reading: their end time comes from the source,
  // so the held time stays exact; one the source no longer knows is ended now.
  std::vector<core::LeaseUsage> gone;
  {
    std::lock_guard lock(mu_);
    for (const auto& entry : acc_.rows()) {
      const core::LeaseUsage& row = entry.second;
      if (row.released_at_ms) continue;
      const bool still =
          std::any_of(active->begin(), active->end(), [&](const core::Lease& l) { return l.id == row.lease_id; });
      if (!still) gone.push_back(row);
    }
  }
  std::vector<core::Lease> leases = *active;
  if (!gone.empty()) {
    std::vector<std::string> ids;
    for (const auto& row : gone) ids.push_back(row.lease_id);
    auto found = source_.find ? source_.find(ids) : Result<std::vector<core::Lease>>(std::vector<core::Lease>{});
    if (!found) {
      note_error("cannot look up ended leases: " + found.error().message);
      gone.clear();  // tried again at the next reading
    }
    for (const auto& row : gone) {
      const auto it =
          std::find_if(found->begin(), found->end(), [&](const core::Lease& l) { return l.id == row.lease_id; });
      core::Lease l;
      if (it != found->end()) {
        if (!it->released_at_ms) continue;  // active after all (a race with active()): next reading
        l = *it;
      } else {  // the source no longer knows it: ended now
        l.id = row.lease_id;
        l.job_id = row.job_id;
        l.owner.user = row.user;
        l.created_at_ms = row.created_at_ms;
        l.released_at_ms = now;
      }
      leases.push_back(std::move(l));
    }
  }

  // Leases created and ended since the last reading: never active at a reading, still held.
  // The window reaches a little before the last reading: the lease times come from the store's clock,
  // and a reading the accumulator skipped (older than the one before) must not lose what ended then.
  constexpr std::int64_t kEndedMarginMs = 5000;
  if (source_.ended_since && last_observed_ms_) {
    auto ended = source_.ended_since(*last_observed_ms_ - kEndedMarginMs);
    if (!ended) {
      note_error("cannot read the leases that ended: " + ended.error().message);
    } else {
      std::lock_guard lock(mu_);
      for (auto& l : *ended) {
        if (!l.released_at_ms || acc_.rows().count(l.id) || finalized_.count(l.id)) continue;
        if (std::any_of(leases.begin(), leases.end(), [&](const core::Lease& x) { return x.id == l.id; })) continue;
        leases.push_back(std::move(l));
      }
    }
  }
  if (!last_observed_ms_ || now > *last_observed_ms_) last_observed_ms_ = now;

  std::vector<core::ReclaimDecision> decisions;
  {
    std::lock_guard lock(mu_);
    acc_.add(snapshot, leases);
    decisions = policy_.evaluate(snapshot, *active);
    for (const auto& d : decisions) {
      platform::log_line("usage",
                         std::string(core::to_string(d.action)) + " " + d.lease_id + " (" + d.user + "): " + d.message);
      if (auto a = store_->audit(d); !a) platform::log_line("usage", a.error().message);
    }
    auto finals = acc_.take_final();
    for (const auto& r : finals) finalized_[r.lease_id] = r.released_at_ms.value_or(now);
    for (auto it = finalized_.begin(); it != finalized_.end();)
      it = it->second < *last_observed_ms_ - 2 * kEndedMarginMs ? finalized_.erase(it) : std::next(it);
    if (auto p = store_->put(finals); !p) {
      platform::log_line("usage", p.error().message);
      for (auto& r : finals) acc_.seed(std::move(r));  // kept, written again with the next ones
    } else {
      for (const auto& r : finals) add_to(final_by_user_[r.user], r);
    }
    if (!last_flush_ms_ || now - *last_flush_ms_ >= options_.flush.count()) write_running_locked(now);
  }
  for (const auto& d : decisions) {
    if (d.action == core::ReclaimAction::Warn && warn_) warn_(d.lease_id, d.message);
    if (d.action == core::ReclaimAction::Release && release_) release_(d.lease_id, "idle: reclaimed");
  }
}

void UsageLedger::write_running_locked(std::int64_t now_ms) {
  std::vector<core::LeaseUsage> running;
  for (const auto& [id, row] : acc_.rows())
    if (!row.released_at_ms) running.push_back(row);
  if (auto p = store_->put(running); !p) platform::log_line("usage", p.error().message);
  last_flush_ms_ = now_ms;
}

void UsageLedger::flush() {
  std::lock_guard lock(mu_);
  write_running_locked(core::to_epoch_ms(clock_.wall_now()));
}

sampler::SampleHub::Subscription UsageLedger::attach(sampler::SampleHub& hub, std::chrono::nanoseconds interval) {
  return hub.subscribe(
      interval,
      [this](const Result<core::SnapshotPtr>& s, sampler::SampleHub::TimePoint) {
        if (s && *s) observe(**s);
      },
      /*aligned=*/true);  // aligned like the agent's loop, so both share one driver query
}

Result<std::vector<core::LeaseUsage>> UsageLedger::since(std::int64_t since_ms) {
  std::lock_guard lock(mu_);
  auto stored = store_->since(since_ms);
  if (!stored) return stored.error();
  std::map<std::string, core::LeaseUsage> by_id;
  for (auto& r : *stored) by_id[r.lease_id] = std::move(r);
  for (const auto& [id, row] : acc_.rows())
    if (!row.released_at_ms || *row.released_at_ms >= since_ms) by_id[id] = row;
  std::vector<core::LeaseUsage> out;
  out.reserve(by_id.size());
  for (auto& [id, r] : by_id) out.push_back(std::move(r));
  return out;
}

Result<std::map<std::string, core::LeaseUsage>> UsageLedger::rows_of(const std::vector<std::string>& lease_ids) {
  std::lock_guard lock(mu_);
  std::map<std::string, core::LeaseUsage> out;
  for (const auto& id : lease_ids) {
    auto r = store_->get(id);
    if (!r) return r.error();
    if (*r) out[id] = std::move(**r);
  }
  return out;
}

std::vector<UserUsageCounter> UsageLedger::counters() {
  std::lock_guard lock(mu_);
  std::map<std::string, core::UsageTotals> all = final_by_user_;
  for (const auto& [id, row] : acc_.rows()) add_to(all[row.user], row);
  std::vector<UserUsageCounter> out;
  for (const auto& [user, t] : all) out.push_back({user, t.held_gpu_s, t.busy_gpu_s, t.energy_wh * 3600.0});
  return out;
}

}  // namespace gf::node
