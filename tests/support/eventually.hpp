#pragma once
// Waits for a condition another thread or process brings about: polls `done` until it holds or `limit`
// passes. The limits are generous (the suite runs on two loaded cores and under sanitizers); the wait
// ends as soon as the condition holds, so a generous limit costs a passing test nothing.
//
//   ASSERT_TRUE(gf::test::eventually([&] { return agent.count() == 3; })) << "the third update";
//   const bool in_time = gf::test::eventually(done, 2s);
//
// What it returns reads as a bool and, inside EXPECT_TRUE/ASSERT_TRUE, says how long it waited.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace gf::test {

// A gtest AssertionResult (the failure says how long was waited) that also converts to bool implicitly.
class Waited : public ::testing::AssertionResult {
 public:
  explicit Waited(::testing::AssertionResult r) : ::testing::AssertionResult(std::move(r)) {}
  operator bool() const { return static_cast<bool>(static_cast<const ::testing::AssertionResult&>(*this)); }  // NOLINT
};

inline Waited eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(10),
                         std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return Waited(::testing::AssertionFailure() << "the condition did not hold within " << limit.count() << " ms");
    std::this_thread::sleep_for(every);
  }
  return Waited(::testing::AssertionSuccess());
}

}  // namespace gf::test
