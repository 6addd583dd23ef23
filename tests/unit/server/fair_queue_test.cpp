// FairQueue (the agent socket's heavy reads, issue 20 finding 3): keys take turns, so one key's burst
// delays another key's item by at most one item; a key's own items keep their order.
#include "server/fair_queue.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gf::server {
namespace {

std::vector<std::string> drain(FairQueue<int, std::string>& q) {
  std::vector<std::string> out;
  while (auto next = q.pop()) out.push_back(next->second);
  return out;
}

TEST(FairQueue, ABurstFromOneKeyDelaysAnotherByOneItem) {
  FairQueue<int, std::string> q;
  for (int i = 0; i < 5; ++i) q.push(1000, "a" + std::to_string(i));
  q.push(1001, "b0");
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(q.size(1000), 5u);
  EXPECT_EQ(drain(q), (std::vector<std::string>{"a0", "b0", "a1", "a2", "a3", "a4"}));
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.pop());
}

TEST(FairQueue, KeysTakeTurnsAndKeepTheirOrder) {
  FairQueue<int, std::string> q;
  q.push(1, "x0");
  q.push(1, "x1");
  q.push(2, "y0");
  q.push(3, "z0");
  q.push(2, "y1");
  EXPECT_EQ(q.pop()->second, "x0");
  q.push(3, "z1");  // pushed while 3 is already waiting for its turn: behind z0, not a second turn
  EXPECT_EQ(drain(q), (std::vector<std::string>{"y0", "z0", "x1", "y1", "z1"}));
}

TEST(FairQueue, AKeyThatEmptiedJoinsAtTheBack) {
  FairQueue<int, std::string> q;
  q.push(1, "x0");
  q.push(2, "y0");
  q.push(2, "y1");
  EXPECT_EQ(q.pop()->first, 1);
  q.push(1, "x1");  // 1 had nothing left: it waits behind 2's turn
  EXPECT_EQ(drain(q), (std::vector<std::string>{"y0", "x1", "y1"}));
}

}  // namespace
}  // namespace gf::server
