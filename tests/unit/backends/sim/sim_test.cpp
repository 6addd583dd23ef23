#include "backends/sim/sim_backend.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "support/fake_clock.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends {
namespace {

using namespace std::chrono_literals;

struct SimTest : ::testing::Test {
  test::FakeClock clock;
  BackendOptions opts() {
    BackendOptions o;
    o.clock = &clock;
    o.sim_scenario = std::string(GF_FIXTURES_DIR) + "/sim/two_gpus.json";
    return o;
  }
};

TEST_F(SimTest, FollowsTheScenarioAndSaysSimulated) {
  auto b = open_sim(opts());
  ASSERT_TRUE(b) << b.error().message;
  clock.advance(5s);  // halfway up the ramp
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->simulated);
  EXPECT_EQ(s->backend, "sim");
  EXPECT_EQ(s->driver_version, "sim-test");
  ASSERT_EQ(s->gpus.size(), 2u);
  const auto& a = s->gpus[0];
  EXPECT_EQ(a.name, "Sim A100");
  EXPECT_EQ(*a.utilization_pct, 50u);
  EXPECT_EQ(*a.memory_used_mib, 10240u);
  EXPECT_EQ(*a.memory_free_mib, 30720u);
  EXPECT_EQ(a.processes.size(), 1u);
  EXPECT_NE(a.processes[0].command.find("simulated"), std::string::npos);
  EXPECT_EQ(s->gpus[1].health, core::Health::Lost);  // lost_after_s: 5
}

TEST_F(SimTest, EnergyIntegratesPower) {
  auto b = open_sim(opts());
  ASSERT_TRUE(b);
  auto s0 = (*b)->snapshot();
  clock.advance(1s);
  auto s1 = (*b)->snapshot();
  ASSERT_TRUE(s0 && s1);
  const auto e0 = *s0->gpus[0].energy_mj, e1 = *s1->gpus[0].energy_mj;
  EXPECT_GT(e1, e0);
  // About one second of the GPU's power, in millijoules.
  EXPECT_NEAR(static_cast<double>(e1 - e0), *s1->gpus[0].power_draw_w * 1000.0, 40000.0);
}

TEST_F(SimTest, GpuCountOverride) {
  auto o = opts();
  o.sim_scenario.clear();  // built-in demo
  o.sim_gpus = 8;
  auto b = open_sim(o);
  ASSERT_TRUE(b);
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->gpus.size(), 8u);
  std::set<std::string> uuids;
  for (const auto& g : s->gpus) uuids.insert(g.uuid);
  EXPECT_EQ(uuids.size(), 8u);
}

TEST_F(SimTest, UnsupportedFieldsReadAsNotSupported) {
  const test::TempDir dir;
  test::write_file(dir / "s.json", R"({"gpus": [{"unsupported": ["fan_speed", "memory.used"]}, {}]})");
  auto o = opts();
  o.sim_scenario = (dir / "s.json").string();
  auto b = open_sim(o);
  std::filesystem::remove(dir / "s.json");  // read at open
  ASSERT_TRUE(b) << b.error().message;
  auto s = (*b)->snapshot();
  ASSERT_TRUE(s);
  ASSERT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(s->gpus[0].fan_pct.why(), core::Absent::NotSupported);
  EXPECT_FALSE(s->gpus[0].memory_used_mib.has_value());
  EXPECT_TRUE(s->gpus[0].temperature_c.has_value());
  EXPECT_TRUE(s->gpus[1].fan_pct.has_value());

  // The built-in demo shows one: GPU 2 is passively cooled.
  o.sim_scenario.clear();
  auto demo = open_sim(o);
  ASSERT_TRUE(demo) << demo.error().message;
  auto d = (*demo)->snapshot();
  ASSERT_TRUE(d);
  ASSERT_EQ(d->gpus.size(), 4u);
  EXPECT_EQ(d->gpus[2].fan_pct.why(), core::Absent::NotSupported);
  EXPECT_TRUE(d->gpus[0].fan_pct.has_value());
}

TEST_F(SimTest, BadScenariosGiveOneClearError) {
  const test::TempDir dir;
  auto write = [&](const std::string& text) {
    test::write_file(dir / "s.json", text);
    auto o = opts();
    o.sim_scenario = (dir / "s.json").string();
    return open_sim(o);
  };
  EXPECT_NE(write("{not json").error().message.find("not valid JSON"), std::string::npos);
  EXPECT_NE(write("[]").error().message.find("JSON object"), std::string::npos);
  EXPECT_NE(write("{\"gpus\": []}").error().message.find("non-empty"), std::string::npos);
  EXPECT_NE(write("{\"gpus\": [{\"memory_total_mib\": \"lots\"}]}").error().message.find("must be a number"),
            std::string::npos);
  EXPECT_NE(write("{\"gpus\": [{\"load\": [{\"t\": 5}, {\"t\": 1}]}]}").error().message.find("time order"),
            std::string::npos);
  EXPECT_NE(write("{\"gpus\": [{\"unsupported\": [\"fan\"]}]}").error().message.find("not a field key"),
            std::string::npos);
  EXPECT_NE(write("{\"gpus\": [{\"unsupported\": \"fan_speed\"}]}").error().message.find("array of field keys"),
            std::string::npos);
  auto o = opts();
  o.sim_scenario = "/nonexistent/scenario.json";
  EXPECT_NE(open_sim(o).error().message.find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace gf::backends
