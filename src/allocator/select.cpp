// select_gpus(): eligibility, then the single-GPU rule or the set search, then the words that say why.
#include "allocator/select.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "allocator/set_search.hpp"
#include "core/score.hpp"

namespace gf::allocator {
namespace {

// Same tolerance as the set search: equal availability must fall through to the index tie-break.
constexpr double kAvailabilityEpsilon = 1e-9;

unsigned level_score(core::LinkLevel l) noexcept {
  switch (l) {
    case core::LinkLevel::SameBoard: return 60;
    case core::LinkLevel::SingleSwitch: return 50;
    case core::LinkLevel::MultiSwitch: return 40;
    case core::LinkLevel::HostBridge: return 30;
    case core::LinkLevel::NumaNode: return 20;
    case core::LinkLevel::CrossSocket: return 10;
    case core::LinkLevel::Unknown: break;
  }
  return 0;
}

struct Eligible {
  const core::GpuReading* gpu = nullptr;
  double availability = 0;
};

double availability_of(const core::GpuReading& g) {
  if (g.availability_score) return *g.availability_score;
  // A GPU without memory or utilization readings can still be eligible (no floor, no ceiling); it
  // then ranks last on availability rather than being dropped.
  return core::availability_score(g).value_or(0.0);
}

std::string gpu_summary(const Eligible& e) {
  const auto& g = *e.gpu;
  const std::string memory =
      g.memory_free_mib ? fmt::format("{} MiB free", *g.memory_free_mib) : std::string("free memory unknown");
  const std::string util =
      g.utilization_pct ? fmt::format("utilization {} %", *g.utilization_pct) : std::string("utilization unknown");
  return fmt::format("availability {:.2f} ({}, {})", e.availability, memory, util);
}

std::string describe_link(const core::Topology& t, unsigned a, unsigned b) {
  if (const unsigned n = t.nvlinks(a, b); n > 0) return fmt::format("GPU {} (NVLink x{})", b, n);
  const auto level = t.level(a, b);
  if (level == core::LinkLevel::Unknown) return fmt::format("GPU {} (link unknown)", b);
  return fmt::format("GPU {} ({})", b, core::to_string(level));
}

std::string not_enough(const core::Snapshot& s, const std::vector<Refusal>& refused, unsigned count,
                       std::size_t eligible) {
  const char* plural = count == 1 ? "" : "s";
  if (s.gpus.empty()) return fmt::format("need {} GPU{}, but no GPUs were found", count, plural);
  std::vector<const core::GpuReading*> gpus;
  for (const auto& g : s.gpus) gpus.push_back(&g);
  std::stable_sort(gpus.begin(), gpus.end(),
                   [](const core::GpuReading* a, const core::GpuReading* b) { return a->index < b->index; });
  std::string out = fmt::format("need {} GPU{}, but only {} of {} {} eligible:", count, plural, eligible, s.gpus.size(),
                                eligible == 1 ? "is" : "are");
  for (const auto* g : gpus) {
    auto it = std::find_if(refused.begin(), refused.end(), [&](const Refusal& r) { return r.index == g->index; });
    out += fmt::format("\n  GPU {}: {}", g->index, it == refused.end() ? std::string("eligible") : it->reason);
  }
  return out;
}

void choose_one(const LinkScores& scores, const std::vector<Eligible>& eligible, Selection& sel) {
  // Cost of taking a GPU: the link score it has to the other eligible GPUs, i.e. what a later
  // multi-GPU job loses. Taking half of an NVLink pair costs 100s; an unpaired GPU costs 10s.
  // Links are symmetric (Topology sets both directions): each pair is scored once, for both ends. No
  // topology at all (size 0): every cost is 0 without scoring n² pairs per decision.
  std::vector<unsigned> cost(eligible.size(), 0);
  if (scores.size() > 0)
    for (std::size_t i = 0; i < eligible.size(); ++i)
      for (std::size_t j = i + 1; j < eligible.size(); ++j) {
        const unsigned score = scores(eligible[i].gpu->index, eligible[j].gpu->index);
        cost[i] += score;
        cost[j] += score;
      }

  std::size_t best = 0;
  for (std::size_t i = 1; i < eligible.size(); ++i) {
    if (cost[i] != cost[best]) {
      if (cost[i] < cost[best]) best = i;
      continue;
    }
    // `eligible` is in ascending index, so keeping the earlier one on a tie keeps the lower index.
    if (eligible[i].availability > eligible[best].availability + kAvailabilityEpsilon) best = i;
  }
  const auto [lowest, highest] = std::minmax_element(cost.begin(), cost.end());
  const auto& chosen = eligible[best];
  sel.indices = {chosen.gpu->index};
  sel.link_score = 0;
  if (*lowest == *highest) {
    sel.method = "availability score";
    sel.why = {fmt::format("GPU {}: best {} of {} eligible GPU{}", chosen.gpu->index, gpu_summary(chosen),
                           eligible.size(), eligible.size() == 1 ? "" : "s")};
  } else {
    sel.method = "topology: fewest links broken";
    sel.why = {
        fmt::format("GPU {}: {}; taking it breaks the fewest links: link score {} to the other {} eligible "
                    "GPUs (best-linked GPU: {}), so better-linked GPUs stay together for larger jobs",
                    chosen.gpu->index, gpu_summary(chosen), cost[best], eligible.size() - 1, *highest)};
  }
}

void choose_set(const core::Topology& t, const LinkScores& scores, const std::vector<Eligible>& eligible, unsigned k,
                Selection& sel) {
  detail::Candidates c;
  c.count = static_cast<unsigned>(eligible.size());
  c.links.assign(static_cast<std::size_t>(c.count) * c.count, 0);
  c.availability.reserve(c.count);
  unsigned lowest = ~0u, highest = 0;
  for (unsigned i = 0; i < c.count; ++i) {
    c.availability.push_back(eligible[i].availability);
    for (unsigned j = 0; j < c.count; ++j) {
      if (i == j) continue;
      const unsigned score = scores(eligible[i].gpu->index, eligible[j].gpu->index);
      c.links[static_cast<std::size_t>(i) * c.count + j] = score;
      lowest = std::min(lowest, score);
      highest = std::max(highest, score);
    }
  }
  const detail::SetChoice choice = detail::best_set(c, k, kExhaustiveLimit);

  bool all_nvlink = true;
  for (unsigned p : choice.members) sel.indices.push_back(eligible[p].gpu->index);
  for (std::size_t i = 0; i < sel.indices.size(); ++i)
    for (std::size_t j = i + 1; j < sel.indices.size(); ++j)
      all_nvlink = all_nvlink && t.nvlinks(sel.indices[i], sel.indices[j]) > 0;
  sel.link_score = static_cast<double>(choice.link_sum);

  if (lowest == highest) {
    // Every pair links alike (typically: no topology known): only availability decides.
    sel.method = "availability score";
  } else {
    const std::string kind =
        all_nvlink ? (k == 2 ? std::string("NVLink pair") : fmt::format("fully NVLink-connected set of {}", k))
                   : std::string("best-linked set");
    const std::string search = choice.exhaustive ? fmt::format("{} sets compared", choice.sets_considered)
                                                 : fmt::format("greedy from each of {} GPUs, then swaps", c.count);
    sel.method = fmt::format("topology: {} ({})", kind, search);
  }
  for (unsigned p : choice.members) {
    std::vector<std::string> links;
    for (unsigned other : choice.members)
      if (other != p) links.push_back(describe_link(t, eligible[p].gpu->index, eligible[other].gpu->index));
    sel.why.push_back(fmt::format("GPU {}: {}; linked to {}", eligible[p].gpu->index, gpu_summary(eligible[p]),
                                  fmt::join(links, ", ")));
  }
}

}  // namespace

unsigned pair_link_score(const core::Topology& t, unsigned a, unsigned b) noexcept {
  if (const unsigned n = t.nvlinks(a, b); n > 0) return 100 * n;
  return level_score(t.level(a, b));
}

LinkScores::LinkScores(const core::Topology& t) : n_(t.size()) {
  scores_.resize(static_cast<std::size_t>(n_) * n_);
  for (unsigned a = 0; a < n_; ++a)
    for (unsigned b = 0; b < n_; ++b)
      scores_[static_cast<std::size_t>(a) * n_ + b] = a == b ? 0 : pair_link_score(t, a, b);
}

Result<Selection> select_gpus(const core::Snapshot& s, const core::Topology& t, const SelectRequest& r,
                              const LinkScores* scores) {
  if (r.need.gpus == 0) return make_error("cannot select 0 GPUs: ask for at least one");
  Selection sel;
  sel.refused = eligibility(s, r);

  std::set<unsigned> refused;
  for (const auto& f : sel.refused) refused.insert(f.index);
  std::vector<Eligible> eligible;
  std::set<unsigned> seen;  // a snapshot lists each index once; never offer one twice if it does not
  for (const auto& g : s.gpus)
    if (!refused.contains(g.index) && seen.insert(g.index).second) eligible.push_back({&g, availability_of(g)});
  std::sort(eligible.begin(), eligible.end(),
            [](const Eligible& a, const Eligible& b) { return a.gpu->index < b.gpu->index; });

  if (eligible.size() < r.need.gpus) return make_error(not_enough(s, sel.refused, r.need.gpus, eligible.size()));
  std::optional<LinkScores> own;
  if (!scores) scores = &own.emplace(t);
  if (r.need.gpus == 1)
    choose_one(*scores, eligible, sel);
  else
    choose_set(t, *scores, eligible, r.need.gpus, sel);
  return sel;
}

}  // namespace gf::allocator
