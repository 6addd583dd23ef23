#include "wire/usage_json.hpp"

#include <gtest/gtest.h>

#include "wire/prometheus.hpp"

namespace gf::wire {
namespace {

core::LeaseUsage usage(double held_s, double busy_s, double util_pct, double energy_wh) {
  core::LeaseUsage u;
  u.lease_id = "L1";
  u.job_id = "J1";
  u.user = "alice";
  u.held_gpu_s = held_s;
  u.busy_gpu_s = busy_s;
  u.covered_gpu_s = held_s;
  u.util_gpu_s = util_pct * held_s;
  u.energy_wh = energy_wh;
  u.peak_mem_mib = 4096;
  u.released_at_ms = 1;
  return u;
}

TEST(UsageJson, EfficiencyLineReadsLikeTheIssueExample) {
  EXPECT_EQ(efficiency_line(usage(7200, 5040, 63, 1200)), "2.0 GPU-h held, 1.4 busy (70 %), mean util 63 %, 1.2 kWh");
}

TEST(UsageJson, EfficiencyLineOfAShortLeaseKeepsDigitsAndSaysWhatIsUnknown) {
  EXPECT_EQ(efficiency_line(usage(1.101, 0, 0, 0.02)), "0.00031 GPU-h held, 0.0 busy (0 %), mean util 0 %, 0.0 Wh");
  auto u = usage(36, 0, 0, 0.5);
  u.covered_gpu_s = 0;
  EXPECT_EQ(efficiency_line(u), "0.01 GPU-h held, 0.0 busy (0 %), mean util n/a, 0.5 Wh");
}

TEST(UsageJson, LeaseUsageDocument) {
  const auto j = lease_usage_json(usage(7200, 5040, 63, 1200));
  EXPECT_DOUBLE_EQ(j["held_gpu_h"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["busy_pct"].get<double>(), 70.0);
  EXPECT_DOUBLE_EQ(j["energy_kwh"].get<double>(), 1.2);
  EXPECT_EQ(j["peak_mem_mib"].get<int>(), 4096);
  EXPECT_TRUE(j["final"].get<bool>());
  EXPECT_EQ(j["line"].get<std::string>(), "2.0 GPU-h held, 1.4 busy (70 %), mean util 63 %, 1.2 kWh");
}

TEST(UsageJson, UsageDocumentGroupsAndReadsBack) {
  auto a = usage(3600, 1800, 50, 500);
  auto b = usage(7200, 0, 0, 100);
  b.lease_id = "L2";
  b.job_id = "J2";
  b.user = "bob";
  const auto doc = usage_json("node-1", 1'700'000'000'000, core::UsageGroup::User, {a, b});
  EXPECT_EQ(doc["by"], "user");
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_EQ(doc["rows"][0]["key"], "bob");  // largest held first
  EXPECT_DOUBLE_EQ(doc["total"]["held_gpu_h"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(doc["total"]["busy_pct"].get<double>(), 16.6667);  // rounded to 4 decimals

  auto back = parse_usage_json(doc.dump());
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->rows.size(), 2u);
  EXPECT_EQ(back->rows[1].key, "alice");
  EXPECT_DOUBLE_EQ(back->rows[1].held_gpu_h, 1.0);
  EXPECT_DOUBLE_EQ(*back->rows[1].busy_pct, 50.0);
  EXPECT_DOUBLE_EQ(back->rows[1].energy_kwh, 0.5);
  EXPECT_EQ(back->total.leases, 2u);
}

TEST(UsageJson, ParseRejectsWhatIsNotAUsageDocument) {
  for (const char* bad : {"", "[1]", "{\"rows\": 3}", "{\"rows\": [{\"key\": \"a\"}]}", "{\"rows\": [7]}"}) {
    auto r = parse_usage_json(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::Invalid) << bad;
  }
}

TEST(PrometheusUsers, CountersPerUserWithEscapedLabels) {
  std::string out;
  write_prometheus_users(out, "node-1", {{"al\"i\\ce\n", 3.5, 1.25, 350}, {"bob", 1, 0, 0}});
  EXPECT_NE(out.find("# TYPE gpufleet_user_gpu_held_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(out.find("# TYPE gpufleet_user_gpu_busy_seconds_total counter\n"), std::string::npos);
  EXPECT_NE(out.find("# TYPE gpufleet_user_energy_joules_total counter\n"), std::string::npos);
  EXPECT_NE(out.find("gpufleet_user_gpu_held_seconds_total{user=\"al\\\"i\\\\ce\\n\",Hostname=\"node-1\"} 3.5\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("gpufleet_user_energy_joules_total{user=\"bob\",Hostname=\"node-1\"} 0\n"), std::string::npos)
      << out;
  std::string none;
  write_prometheus_users(none, "node-1", {});
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace gf::wire
