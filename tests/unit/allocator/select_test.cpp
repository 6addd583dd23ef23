// select_gpus(): ranking by availability, topology-aware sets (NVLink pairs, DGX-1 quads, a 64-GPU
// node on the greedy path), the single-GPU rule that keeps pairs whole, and the error that lists
// every GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "allocator/select.hpp"
#include "allocator_support.hpp"

namespace gf::allocator {
namespace {

using core::LinkLevel;
using test::gpu;
using test::snapshot_of;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::StartsWith;

SelectRequest want(unsigned count) {
  SelectRequest r;
  r.need.gpus = count;
  return r;
}

Selection select_ok(const core::Snapshot& s, const core::Topology& t, const SelectRequest& r) {
  auto sel = select_gpus(s, t, r);
  EXPECT_TRUE(sel) << sel.error().message;
  return sel ? *sel : Selection{};
}

core::GpuReading scored(unsigned index, double score) {
  auto g = gpu(index);
  g.availability_score = score;
  return g;
}

// Distinct scores: 3 (0.99) > 1 (0.95) > 2 (0.84) > 0 (0.83).
core::Snapshot ranked() {
  return snapshot_of({gpu(0, 80000, 40), gpu(1, 80000, 10), gpu(2, 60000, 0), gpu(3, 80000, 0)});
}

TEST(SelectGpus, WithoutTopologyTheBestScoresWin) {
  for (const core::Topology& t : {core::Topology{}, test::uniform(4, LinkLevel::CrossSocket)}) {
    auto one = select_ok(ranked(), t, want(1));
    EXPECT_THAT(one.indices, ElementsAre(3u));
    EXPECT_EQ(one.method, "availability score");
    auto two = select_ok(ranked(), t, want(2));
    EXPECT_THAT(two.indices, ElementsAre(1u, 3u));
    EXPECT_EQ(two.method, "availability score");
    EXPECT_THAT(select_ok(ranked(), t, want(3)).indices, ElementsAre(1u, 2u, 3u));
  }
}

TEST(SelectGpus, EqualScoresGoToTheLowestIndices) {
  EXPECT_THAT(select_ok(test::idle_gpus(4), {}, want(1)).indices, ElementsAre(0u));
  EXPECT_THAT(select_ok(test::idle_gpus(4), {}, want(2)).indices, ElementsAre(0u, 1u));
}

TEST(SelectGpus, UsesTheSnapshotsScoreWhenPresent) {
  // Same readings; only the filled-in scores differ.
  EXPECT_THAT(select_ok(snapshot_of({scored(0, 0.1), scored(1, 0.9), scored(2, 0.5)}), {}, want(1)).indices,
              ElementsAre(1u));
}

TEST(SelectGpus, TwoOfFourTakesAnNvLinkPairOverTheTwoBestScores) {
  // By score alone the answer would be {0, 2}, which share no NVLink.
  const auto s = snapshot_of({scored(0, 0.99), scored(1, 0.50), scored(2, 0.98), scored(3, 0.60)});
  auto sel = select_ok(s, test::two_pairs(), want(2));
  EXPECT_THAT(sel.indices, ElementsAre(2u, 3u));  // 1.58 summed beats {0, 1}'s 1.49
  EXPECT_THAT(sel.method, StartsWith("topology: NVLink pair"));
  EXPECT_DOUBLE_EQ(sel.link_score, 400.0);
  ASSERT_EQ(sel.why.size(), 2u);
  EXPECT_THAT(sel.why[0], AllOf(StartsWith("GPU 2: availability 0.98"), HasSubstr("GPU 3 (NVLink x4)")));
  EXPECT_THAT(sel.why[1], AllOf(StartsWith("GPU 3: availability 0.60"), HasSubstr("GPU 2 (NVLink x4)")));
}

TEST(SelectGpus, OneGpuIsTakenWhereItBreaksNoPair) {
  core::Topology t = test::uniform(4, LinkLevel::CrossSocket);
  t.set_nvlinks(0, 1, 4);  // 2 and 3 have no NVLink
  // GPU 0 scores best, but taking it would split the only pair.
  auto s = snapshot_of({scored(0, 0.99), scored(1, 0.97), scored(2, 0.70), scored(3, 0.80)});
  auto sel = select_ok(s, t, want(1));
  EXPECT_THAT(sel.indices, ElementsAre(3u));
  EXPECT_EQ(sel.method, "topology: fewest links broken");
  ASSERT_EQ(sel.why.size(), 1u);
  EXPECT_THAT(sel.why[0], AllOf(StartsWith("GPU 3: availability 0.80"), HasSubstr("breaks the fewest links")));
  EXPECT_DOUBLE_EQ(sel.link_score, 0.0);

  s.gpus[2].availability_score = 0.90;  // now 2 is the better unpaired GPU
  EXPECT_THAT(select_ok(s, t, want(1)).indices, ElementsAre(2u));
  EXPECT_THAT(select_ok(s, core::Topology{}, want(1)).indices, ElementsAre(0u));  // no topology: best score
}

TEST(SelectGpus, OneGpuPrefersTheOneWhosePartnerIsAlreadyGone) {
  auto s = test::idle_gpus(4);
  s.gpus[3].health = core::Health::Lost;  // 2's NVLink partner
  EXPECT_THAT(select_ok(s, test::two_pairs(), want(1)).indices, ElementsAre(2u));
}

// True when every pair of `indices` has an NVLink in `t`.
bool fully_nvlinked(const core::Topology& t, const std::vector<unsigned>& indices) {
  for (std::size_t i = 0; i < indices.size(); ++i)
    for (std::size_t j = i + 1; j < indices.size(); ++j)
      if (t.nvlinks(indices[i], indices[j]) == 0) return false;
  return true;
}

TEST(SelectGpus, FourOfEightOnADgx1TakesAFullyLinkedQuad) {
  const auto t = test::dgx1();
  auto s = test::idle_gpus(8);
  for (unsigned i : {0u, 1u, 2u, 3u}) s.gpus[i] = gpu(i, 70000);  // 4..7 are a little freer
  auto sel = select_ok(s, t, want(4));
  EXPECT_THAT(sel.indices, ElementsAre(4u, 5u, 6u, 7u));
  EXPECT_TRUE(fully_nvlinked(t, sel.indices));
  EXPECT_THAT(sel.method, StartsWith("topology: fully NVLink-connected set of 4 (70 sets compared)"));
  EXPECT_DOUBLE_EQ(sel.link_score, 900.0);  // 1+1+2+2+1+2 links

  // With GPU 5 leased the other quad is the only fully linked one, even though it is less free.
  SelectRequest r = want(4);
  r.leased = {5};
  sel = select_ok(s, t, r);
  EXPECT_THAT(sel.indices, ElementsAre(0u, 1u, 2u, 3u));
  EXPECT_TRUE(fully_nvlinked(t, sel.indices));
  EXPECT_THAT(sel.refused, ElementsAre(AllOf(Field(&Refusal::index, 5u), Field(&Refusal::reason, "leased"))));
}

TEST(SelectGpus, TwoOfEightOnADgx1TakesADoubleLinkedPair) {
  const auto sel = select_ok(test::idle_gpus(8), test::dgx1(), want(2));
  EXPECT_THAT(sel.indices, ElementsAre(0u, 3u));  // NV2; the lowest of the double-linked pairs
  EXPECT_DOUBLE_EQ(sel.link_score, 200.0);
}

// LinkScores, kept by the node's allocator, is the same table pair_link_score gives, and a decision
// made with it is the decision made without it, for one GPU and for sets.
TEST(SelectGpus, KeptLinkScoresGiveTheSameDecisions) {
  const auto t = test::dgx1();
  const LinkScores scores(t);
  ASSERT_EQ(scores.size(), 8u);
  for (unsigned a = 0; a < 9; ++a)
    for (unsigned b = 0; b < 9; ++b) EXPECT_EQ(scores(a, b), a == b ? 0u : pair_link_score(t, a, b)) << a << "," << b;
  auto s = test::idle_gpus(8);
  s.gpus[6] = gpu(6, 70000);
  for (unsigned k : {1u, 2u, 4u}) {
    SelectRequest r = want(k);
    r.leased = {0};
    auto with = select_gpus(s, t, r, &scores);
    auto without = select_gpus(s, t, r);
    ASSERT_TRUE(with && without);
    EXPECT_EQ(with->indices, without->indices) << k;
    EXPECT_EQ(with->method, without->method) << k;
    EXPECT_EQ(with->why, without->why) << k;
  }
  EXPECT_EQ(LinkScores(core::Topology{}).size(), 0u);
}

TEST(SelectGpus, TooFewEligibleListsEveryGpuAndTheCount) {
  auto lost = gpu(1);
  lost.health = core::Health::Lost;
  lost.health_message = "GPU is lost";
  SelectRequest r = want(2);
  r.leased = {0};
  auto sel = select_gpus(snapshot_of({gpu(0), lost, gpu(2), gpu(3, 1000)}), test::two_pairs(), r);
  ASSERT_FALSE(sel);
  EXPECT_EQ(sel.error().message,
            "need 2 GPUs, but only 1 of 4 is eligible:\n"
            "  GPU 0: leased\n"
            "  GPU 1: lost: GPU is lost\n"
            "  GPU 2: eligible\n"
            "  GPU 3: 1000 MiB free < 8000 MiB floor");
}

TEST(SelectGpus, NothingToChooseFromIsAnError) {
  auto none = select_gpus(snapshot_of({}), {}, want(1));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message, "need 1 GPU, but no GPUs were found");
  auto zero = select_gpus(test::idle_gpus(2), {}, want(0));
  ASSERT_FALSE(zero);
  EXPECT_THAT(zero.error().message, HasSubstr("at least one"));
}

TEST(SelectGpus, AllEligibleGpusCanBeTakenAndRefusalsTravelWithTheChoice) {
  auto s = test::idle_gpus(4);
  s.gpus[1] = gpu(1, 100);
  auto sel = select_ok(s, test::two_pairs(), want(3));
  EXPECT_THAT(sel.indices, ElementsAre(0u, 2u, 3u));
  EXPECT_THAT(sel.refused, ElementsAre(Field(&Refusal::index, 1u)));
  EXPECT_EQ(sel.why.size(), 3u);
}

TEST(SelectGpus, TheSearchIsExhaustiveUpToTheLimitThenGreedy) {
  // C(16, 8) = 12870 sets: exhaustive; C(17, 8) = 24310: greedy.
  auto sixteen = select_ok(test::idle_gpus(16), test::big_node(16), want(8));
  EXPECT_THAT(sixteen.method, HasSubstr("(12870 sets compared)"));
  EXPECT_THAT(sixteen.indices, ElementsAre(0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u));
  auto seventeen = select_ok(test::idle_gpus(17), test::big_node(17), want(8));
  EXPECT_THAT(seventeen.method, HasSubstr("greedy from each of 17 GPUs"));
  EXPECT_THAT(seventeen.indices, ElementsAre(0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u));
  EXPECT_DOUBLE_EQ(seventeen.link_score, sixteen.link_score);
}

double recomputed_link_score(const core::Topology& t, const std::vector<unsigned>& indices) {
  double sum = 0;
  for (std::size_t i = 0; i < indices.size(); ++i)
    for (std::size_t j = i + 1; j < indices.size(); ++j) sum += pair_link_score(t, indices[i], indices[j]);
  return sum;
}

TEST(SelectGpus, SixtyFourGpusTakeTheFreestWholeBlockOfEight) {
  const auto t = test::big_node(64);
  auto s = test::idle_gpus(64);
  for (auto& g : s.gpus)
    if (g.index / 8 != 3) g = gpu(g.index, 70000);  // block 3 (24..31) is the freest
  auto sel = select_ok(s, t, want(8));
  EXPECT_THAT(sel.indices, ElementsAre(24u, 25u, 26u, 27u, 28u, 29u, 30u, 31u));
  EXPECT_THAT(sel.method, HasSubstr("greedy"));
  // 4 NVLink pairs (1600) + 8 same-switch pairs (400) + 16 same-host-bridge pairs (480).
  EXPECT_DOUBLE_EQ(sel.link_score, 2480.0);
  EXPECT_DOUBLE_EQ(sel.link_score, recomputed_link_score(t, sel.indices));
}

TEST(SelectGpus, SixtyFourGpusWithHolesGiveAValidWholeBlock) {
  const auto t = test::big_node(64);
  auto s = test::idle_gpus(64);
  s.gpus[0].health = core::Health::Lost;
  s.gpus[40] = gpu(40, 100);
  s.gpus[13].processes.push_back({});  // pid 0: someone else's
  SelectRequest r = want(8);
  r.leased = {24, 26, 30};
  auto sel = select_ok(s, t, r);
  ASSERT_EQ(sel.indices.size(), 8u);
  EXPECT_TRUE(std::is_sorted(sel.indices.begin(), sel.indices.end()));
  EXPECT_EQ(std::adjacent_find(sel.indices.begin(), sel.indices.end()), sel.indices.end());
  for (const auto& f : sel.refused) EXPECT_THAT(sel.indices, ::testing::Not(Contains(f.index))) << f.reason;
  EXPECT_EQ(sel.refused.size(), 6u);
  // Blocks 0, 1, 3 and 5 have holes; block 2 is the lowest whole one.
  EXPECT_THAT(sel.indices, ElementsAre(16u, 17u, 18u, 19u, 20u, 21u, 22u, 23u));
  EXPECT_DOUBLE_EQ(sel.link_score, recomputed_link_score(t, sel.indices));
}

TEST(SelectGpus, OneOfSixtyFourIsTheBestScoreWhenAllLinkAlike) {
  auto s = test::idle_gpus(64);
  for (auto& g : s.gpus) g = gpu(g.index, 70000);
  s.gpus[37] = gpu(37, 80000);
  auto sel = select_ok(s, test::big_node(64), want(1));
  EXPECT_THAT(sel.indices, ElementsAre(37u));
  EXPECT_EQ(sel.method, "availability score");
}

}  // namespace
}  // namespace gf::allocator
