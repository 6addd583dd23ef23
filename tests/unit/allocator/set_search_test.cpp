// The set search on its own: the capped binomial, and the greedy search agreeing with the exhaustive
// one on structured topologies where the optimum is known.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "allocator/select.hpp"
#include "allocator/set_search.hpp"
#include "allocator_support.hpp"

namespace gf::allocator::detail {
namespace {

Candidates candidates(const core::Topology& t, std::vector<double> availability) {
  Candidates c;
  c.count = t.size();
  c.links.assign(static_cast<std::size_t>(c.count) * c.count, 0);
  for (unsigned a = 0; a < c.count; ++a)
    for (unsigned b = 0; b < c.count; ++b)
      if (a != b) c.links[static_cast<std::size_t>(a) * c.count + b] = pair_link_score(t, a, b);
  c.availability = std::move(availability);
  return c;
}

TEST(CombinationsCapped, CountsAndCaps) {
  EXPECT_EQ(combinations_capped(8, 4, 20000), 70u);
  EXPECT_EQ(combinations_capped(16, 8, 20000), 12870u);
  EXPECT_EQ(combinations_capped(17, 8, 20000), 20001u);
  EXPECT_EQ(combinations_capped(64, 8, 20000), 20001u);
  EXPECT_EQ(combinations_capped(64, 2, 20000), 2016u);
  EXPECT_EQ(combinations_capped(64, 63, 20000), 64u);
  EXPECT_EQ(combinations_capped(5, 0, 20000), 1u);
  EXPECT_EQ(combinations_capped(3, 5, 20000), 0u);
  EXPECT_EQ(combinations_capped(1000, 500, 20000), 20001u);  // no overflow on the way
}

TEST(PairLinkScore, NvLinkCountsPerLinkElseTheLevel) {
  core::Topology t(3);
  t.set_nvlinks(0, 1, 6);
  t.set_level(0, 1, core::LinkLevel::CrossSocket);  // NVLink wins over the PCIe level
  EXPECT_EQ(pair_link_score(t, 0, 1), 600u);
  const std::pair<core::LinkLevel, unsigned> levels[] = {
      {core::LinkLevel::SameBoard, 60},  {core::LinkLevel::SingleSwitch, 50}, {core::LinkLevel::MultiSwitch, 40},
      {core::LinkLevel::HostBridge, 30}, {core::LinkLevel::NumaNode, 20},     {core::LinkLevel::CrossSocket, 10},
      {core::LinkLevel::Unknown, 0}};
  for (auto [level, score] : levels) {
    t.set_level(1, 2, level);
    EXPECT_EQ(pair_link_score(t, 1, 2), score) << core::to_string(level);
  }
  EXPECT_EQ(pair_link_score(t, 0, 9), 0u);  // outside the topology
}

// Availability that differs per GPU (so the optimum is unique) but never outweighs a link.
std::vector<double> uneven(unsigned n) {
  std::vector<double> a;
  for (unsigned i = 0; i < n; ++i) a.push_back(0.5 + 0.04 * ((i * 7) % 11) / 11.0);
  return a;
}

TEST(SetSearch, GreedyMatchesExhaustiveOnADgx1) {
  const auto c = candidates(test::dgx1(), uneven(8));
  for (unsigned k = 2; k <= 7; ++k) {
    const auto exact = best_set_exhaustive(c, k);
    const auto greedy = best_set_greedy(c, k);
    EXPECT_TRUE(exact.exhaustive);
    EXPECT_FALSE(greedy.exhaustive);
    EXPECT_EQ(greedy.link_sum, exact.link_sum) << "k=" << k;
    EXPECT_EQ(greedy.members, exact.members) << "k=" << k;
  }
}

TEST(SetSearch, GreedyMatchesExhaustiveOnAHierarchicalNode) {
  const auto c = candidates(test::big_node(16), uneven(16));
  for (unsigned k : {2u, 3u, 5u, 6u, 8u, 12u}) {
    const auto exact = best_set_exhaustive(c, k);
    const auto greedy = best_set_greedy(c, k);
    EXPECT_EQ(greedy.link_sum, exact.link_sum) << "k=" << k;
    EXPECT_NEAR(greedy.availability_sum, exact.availability_sum, 1e-12) << "k=" << k;
  }
}

TEST(SetSearch, SwapsRepairWhatGrowingAloneGetsWrong) {
  // GPUs 0, 1, 2 are a triangle of 3-link NVLinks (900 together); each also has a private partner
  // (3, 4, 5) with 4 links. Growing from any seed takes a partner first and ends at 700; only a swap
  // of the partner for the third triangle GPU finds the 900.
  core::Topology t(6);
  t.set_nvlinks(0, 1, 3);
  t.set_nvlinks(0, 2, 3);
  t.set_nvlinks(1, 2, 3);
  t.set_nvlinks(0, 3, 4);
  t.set_nvlinks(1, 4, 4);
  t.set_nvlinks(2, 5, 4);
  const auto c = candidates(t, std::vector<double>(6, 0.5));
  ASSERT_EQ(best_set_exhaustive(c, 3).link_sum, 900u);
  const auto greedy = best_set_greedy(c, 3);
  EXPECT_THAT(greedy.members, ::testing::ElementsAre(0u, 1u, 2u));
  EXPECT_EQ(greedy.link_sum, 900u);
}

}  // namespace
}  // namespace gf::allocator::detail
