#include "allocator/set_search.hpp"

#include <algorithm>
#include <cstdint>

namespace gf::allocator::detail {
namespace {

// Availability sums are compared with a tolerance: the same set summed in another order must not
// look better, or the "lowest indices" tie-break would depend on the search's visiting order.
constexpr double kAvailabilityEpsilon = 1e-9;

// Strictly better: more link score; then more availability; then lexicographically lower members.
bool better(std::uint64_t link, double avail, const std::vector<unsigned>& members, const SetChoice& best) {
  if (best.members.empty()) return true;
  if (link != best.link_sum) return link > best.link_sum;
  if (avail > best.availability_sum + kAvailabilityEpsilon) return true;
  if (avail < best.availability_sum - kAvailabilityEpsilon) return false;
  return members < best.members;
}

// Sums recomputed in ascending member order, so every path to the same set gives the same numbers.
void score(const Candidates& c, SetChoice& s) {
  std::sort(s.members.begin(), s.members.end());
  s.link_sum = 0;
  s.availability_sum = 0;
  for (std::size_t i = 0; i < s.members.size(); ++i) {
    s.availability_sum += c.availability[s.members[i]];
    for (std::size_t j = i + 1; j < s.members.size(); ++j) s.link_sum += c.link(s.members[i], s.members[j]);
  }
}

struct Exhaustive {
  const Candidates& c;
  unsigned k;
  std::vector<unsigned> current;
  SetChoice best;

  // Visits sets in lexicographic order, so on a full tie the first (lowest) set is kept.
  void visit(unsigned start, std::uint64_t link, double avail) {
    if (current.size() == k) {
      ++best.sets_considered;
      if (better(link, avail, current, best)) {
        best.members = current;
        best.link_sum = link;
        best.availability_sum = avail;
      }
      return;
    }
    const unsigned need = k - static_cast<unsigned>(current.size());
    for (unsigned i = start; i + need <= c.count; ++i) {
      std::uint64_t added = 0;
      for (unsigned m : current) added += c.link(m, i);
      current.push_back(i);
      visit(i + 1, link + added, avail + c.availability[i]);
      current.pop_back();
    }
  }
};

// Swaps one member for one outsider while that raises (link, availability); gain[v] holds
// the summed link score of v to the members. Each accepted swap raises the pair strictly, so this
// ends; the bound is only a guard.
void improve_by_swaps(const Candidates& c, std::vector<unsigned>& members, std::vector<bool>& in,
                      std::vector<std::int64_t>& gain) {
  const unsigned max_rounds = c.count * static_cast<unsigned>(members.size()) + 1;
  for (unsigned round = 0; round < max_rounds; ++round) {
    std::int64_t best_link = 0;
    double best_avail = 0;
    std::size_t out_pos = members.size();
    unsigned in_candidate = 0;
    for (std::size_t p = 0; p < members.size(); ++p) {
      const unsigned x = members[p];
      for (unsigned y = 0; y < c.count; ++y) {
        if (in[y]) continue;
        // Links of y to the members other than x, minus x's links to them.
        const std::int64_t d_link = (gain[y] - c.link(y, x)) - gain[x];
        const double d_avail = c.availability[y] - c.availability[x];
        const bool improves = d_link > 0 || (d_link == 0 && d_avail > kAvailabilityEpsilon);
        if (!improves) continue;
        if (out_pos == members.size() || d_link > best_link || (d_link == best_link && d_avail > best_avail)) {
          best_link = d_link;
          best_avail = d_avail;
          out_pos = p;
          in_candidate = y;
        }
      }
    }
    if (out_pos == members.size()) return;
    const unsigned x = members[out_pos];
    members[out_pos] = in_candidate;
    in[x] = false;
    in[in_candidate] = true;
    for (unsigned v = 0; v < c.count; ++v)
      gain[v] += static_cast<std::int64_t>(c.link(v, in_candidate)) - static_cast<std::int64_t>(c.link(v, x));
  }
}

}  // namespace

std::uint64_t combinations_capped(unsigned n, unsigned k, std::uint64_t cap) {
  if (k > n) return 0;
  k = std::min(k, n - k);
  std::uint64_t c = 1;
  for (unsigned i = 1; i <= k; ++i) {
    // c·(n−k+i)/i is exact at every step (it is C(n−k+i, i)); c <= cap keeps the product in range.
    c = c * (n - k + i) / i;
    if (c > cap) return cap + 1;
  }
  return c;
}

SetChoice best_set_exhaustive(const Candidates& c, unsigned k) {
  Exhaustive search{c, k, {}, {}};
  search.current.reserve(k);
  search.visit(0, 0, 0.0);
  search.best.exhaustive = true;
  score(c, search.best);
  return search.best;
}

SetChoice best_set_greedy(const Candidates& c, unsigned k) {
  SetChoice best;
  std::vector<bool> in(c.count);
  std::vector<std::int64_t> gain(c.count);
  std::vector<unsigned> members;
  members.reserve(k);
  for (unsigned seed = 0; seed < c.count; ++seed) {
    std::fill(in.begin(), in.end(), false);
    members.assign(1, seed);
    in[seed] = true;
    for (unsigned v = 0; v < c.count; ++v) gain[v] = c.link(v, seed);
    // Grow: the outsider best linked to the members so far; then the most available; then the lowest.
    while (members.size() < k) {
      unsigned pick = c.count;
      for (unsigned v = 0; v < c.count; ++v) {
        if (in[v]) continue;
        if (pick == c.count || gain[v] > gain[pick] ||
            (gain[v] == gain[pick] && c.availability[v] > c.availability[pick] + kAvailabilityEpsilon))
          pick = v;
      }
      members.push_back(pick);
      in[pick] = true;
      for (unsigned v = 0; v < c.count; ++v) gain[v] += c.link(v, pick);
    }
    improve_by_swaps(c, members, in, gain);
    SetChoice candidate;
    candidate.members = members;
    score(c, candidate);
    if (better(candidate.link_sum, candidate.availability_sum, candidate.members, best)) {
      best.members = std::move(candidate.members);
      best.link_sum = candidate.link_sum;
      best.availability_sum = candidate.availability_sum;
    }
  }
  best.exhaustive = false;
  best.sets_considered = c.count;
  return best;
}

SetChoice best_set(const Candidates& c, unsigned k, std::uint64_t limit) {
  if (combinations_capped(c.count, k, limit) <= limit) return best_set_exhaustive(c, k);
  return best_set_greedy(c, k);
}

}  // namespace gf::allocator::detail
