#include "scheduler/node_allocator.hpp"

#include "allocator/mig_select.hpp"

#include <fmt/format.h>

namespace gf::scheduler {
namespace {

allocator::SelectRequest select_request(const AllocationRequest& req, const std::vector<core::Lease>& active) {
  allocator::SelectRequest sr;
  sr.need = req.need;
  for (const auto& l : active)
    for (const auto& g : l.gpus) sr.leased.insert(g.index);
  return sr;
}

}  // namespace

std::string holders_text(const std::vector<core::Lease>& active) {
  std::string out;
  for (const auto& l : active) {
    std::vector<unsigned> idx;
    for (const auto& g : l.gpus) idx.push_back(g.index);
    // The owner as the arbiter names it ("alice (uid 1001)"), after its pid; a lease written without the
    // agent has no uid.
    out += fmt::format("{}GPU {} held by {} (lease {}, pid {}{}{})", out.empty() ? "" : "; ", fmt::join(idx, ","),
                       l.name.empty() ? l.job_id : l.name, l.id, l.owner.pid,
                       l.owner.user.empty() ? "" : ", " + l.owner.user,
                       l.owner.uid ? fmt::format(" (uid {})", *l.owner.uid) : "");
  }
  return out;
}

Result<NodeAllocator::Attempt> NodeAllocator::attempt(const AllocationRequest& req, const std::string& waiter_id,
                                                      const Result<core::SnapshotPtr>& reading) {
  // Built in place and returned by name on every path: moving an Attempt (its optional Allocation) into
  // the Result makes GCC 12 at -O3 report the payload as maybe-uninitialized.
  Result<Attempt> result{Attempt{}};
  Attempt& out = *result;
  core::LeaseRequest lr{req.job_id, req.name, req.owner, waiter_id, req.tie};
  auto lease = store_.acquire(
      lr,
      [&](const std::vector<core::Lease>& active,
          const std::vector<core::Waiter>& ahead) -> Result<std::optional<std::vector<core::LeasedGpu>>> {
        // Who holds what is for the words of a "not now"; a grant does not copy every active lease.
        const auto not_now = [&] {
          out.holders = active;
          return std::optional<std::vector<core::LeasedGpu>>();
        };
        out.ahead = ahead.size();
        if (!ahead.empty()) {
          out.why_not = fmt::format("waiting behind {} ({} GPU(s), priority {}) in the queue",
                                    ahead.front().name.empty() ? ahead.front().id : ahead.front().name,
                                    ahead.front().gpus, ahead.front().priority);
          return not_now();
        }
        const auto& snap = reading;
        if (!snap || !*snap) {  // a failed driver query (a hung nvidia-smi, say) is "not now", not the end
          out.why_not = "cannot read the GPUs: " + (snap ? std::string("no reading") : snap.error().message);
          return not_now();
        }
        if (!req.need.mig_profile.empty()) {  // one MIG instance, by its UUID
          allocator::MigRequest mr;
          mr.need = req.need;
          for (const auto& l : active)
            for (const auto& g : l.gpus) mr.leased_uuids.insert(g.uuid);
          auto pick = allocator::select_mig_instance(**snap, mr);
          if (!pick) {
            out.why_not = pick.error().message;
            return not_now();
          }
          std::vector<core::LeasedGpu> one{{pick->gpu_index, pick->instance.uuid}};
          out.granted = Allocation{{}, std::move(pick->selection), *snap};
          return std::optional<std::vector<core::LeasedGpu>>(std::move(one));
        }
        auto sel = allocator::select_gpus(**snap, topology_, select_request(req, active), &scores_);
        if (!sel) {
          out.why_not = sel.error().message;
          return not_now();
        }
        std::vector<core::LeasedGpu> gpus;
        for (unsigned i : sel->indices) {
          std::string uuid;
          for (const auto& g : (*snap)->gpus)
            if (g.index == i) uuid = g.uuid;
          gpus.push_back({i, uuid});
        }
        out.granted = Allocation{{}, std::move(*sel), *snap};
        return std::optional<std::vector<core::LeasedGpu>>(std::move(gpus));
      });
  if (!lease) {
    result = lease.error();
    return result;
  }
  if (!*lease)
    out.granted.reset();
  else
    out.granted->lease = std::move(**lease);
  return result;
}

Result<Allocation> NodeAllocator::allocate(const AllocationRequest& req, const Result<core::SnapshotPtr>& reading) {
  auto r = attempt(req, "", reading);
  if (!r) return r.error();
  if (!r->granted) return make_error(ErrorKind::Unavailable, r->why_not);
  return std::move(*r->granted);
}

Result<Allocation> NodeAllocator::wait_and_allocate(const AllocationRequest& req, const ReadingQuery& query,
                                                    const WaitOptions& opts) {
  core::Waiter w;
  w.id = req.job_id.empty() ? "w" : req.job_id;
  w.name = req.name;
  w.priority = req.priority;
  w.enqueued_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.wall_now().time_since_epoch())
                         .count();  // wall time: shared by processes
  w.gpus = req.need.gpus;
  w.owner = req.owner;
  if (auto r = store_.enqueue(w); !r) return with_context("cannot join the queue: ", r.error());
  const auto start = clock_.now();
  // Saturate: a huge --wait must not overflow the clock into the past.
  const auto max_wait = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::hours(24 * 365 * 100));
  const auto deadline = start + std::min(opts.timeout, max_wait);
  for (;;) {
    auto r = attempt(req, w.id, query());
    if (!r) {
      (void)store_.dequeue(w.id);
      return r.error();
    }
    if (r->granted) return std::move(*r->granted);  // the store dequeued us with the lease
    const auto now = clock_.now();
    WaitProgress p;
    p.holders = std::move(r->holders);
    p.ahead = r->ahead;
    p.waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
    p.why_not = r->why_not;
    const std::string& why = p.why_not;
    const bool cancelled = opts.cancel && opts.cancel->load();
    if (now >= deadline || cancelled) {
      (void)store_.dequeue(w.id);
      std::string held = holders_text(p.holders);
      return make_error(
          ErrorKind::Unavailable,
          fmt::format("{} after waiting {:.0f} s for {} GPU(s): {}{}", cancelled ? "Cancelled" : "Insufficient GPUs",
                      std::chrono::duration<double>(now - start).count(), req.need.gpus, why,
                      held.empty() ? "" : "\nholders: " + held));
    }
    if (opts.progress) opts.progress(p);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    // Woken at once by a release or a queue change anywhere on the node; else re-check after the
    // interval, for load that comes and goes outside gpufleet.
    auto slice = std::min(left, opts.recheck);
    if (opts.cancel) slice = std::min(slice, std::chrono::milliseconds(250));  // stay responsive to Ctrl-C
    store_.wait_for_change(slice);
  }
}

}  // namespace gf::scheduler
