#pragma once
// The search behind select_gpus for count > 1: the best-linked set of k among m candidates.
// Internal to the allocator. Candidates are positions 0..m-1 in ascending GPU index, so "lowest
// positions" is "lowest indices".
#include <cstdint>
#include <vector>

namespace gf::allocator::detail {

struct Candidates {
  unsigned count = 0;
  std::vector<unsigned> links;       // count × count pair link scores, symmetric, 0 on the diagonal
  std::vector<double> availability;  // per candidate

  unsigned link(unsigned a, unsigned b) const { return links[static_cast<std::size_t>(a) * count + b]; }
};

struct SetChoice {
  std::vector<unsigned> members;  // positions, ascending
  std::uint64_t link_sum = 0;
  double availability_sum = 0;
  bool exhaustive = false;
  std::uint64_t sets_considered = 0;  // exhaustive: sets scored; greedy: seeds grown
};

// C(n, k), or cap + 1 when it exceeds cap (so it never overflows).
std::uint64_t combinations_capped(unsigned n, unsigned k, std::uint64_t cap);

// Exhaustive when C(m, k) <= limit, greedy otherwise. Requires 1 <= k <= m.
SetChoice best_set(const Candidates& c, unsigned k, std::uint64_t limit);
SetChoice best_set_exhaustive(const Candidates& c, unsigned k);
SetChoice best_set_greedy(const Candidates& c, unsigned k);

}  // namespace gf::allocator::detail
