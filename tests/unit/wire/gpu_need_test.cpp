// The one codec of a GPU need (wire/gpu_need.hpp): both spellings round-trip, absent keys are the
// policy's defaults, and every bad value is refused naming its key.
#include "wire/gpu_need.hpp"

#include <gtest/gtest.h>

namespace gf::wire {
namespace {

using nlohmann::json;

core::GpuNeed gpu_need_sample() {
  core::GpuNeed n;
  n.gpus = 2;
  n.min_free_memory_mib = 12345;
  n.max_utilization_pct = 70;
  n.allow_busy = true;
  n.mig_profile = "1g.10gb";
  return n;
}

TEST(GpuNeedJson, RoundTripsInBothSpellings) {
  for (const GpuNeedKeys* keys : {&kAgentNeedKeys, &kSeedNeedKeys}) {
    const core::GpuNeed n = gpu_need_sample();
    auto back = gpu_need_from_json(gpu_need_json(n, *keys), *keys);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, n) << keys->min_free_memory_mib;
    const core::GpuNeed plain;  // no MIG profile: no "mig" key
    EXPECT_FALSE(gpu_need_json(plain, *keys).contains("mig"));
    auto plain_back = gpu_need_from_json(gpu_need_json(plain, *keys), *keys);
    ASSERT_TRUE(plain_back);
    EXPECT_EQ(*plain_back, plain);
  }
}

TEST(GpuNeedJson, KeysAreTheDocumentsSpellings) {
  const json agent = gpu_need_json(gpu_need_sample(), kAgentNeedKeys);
  EXPECT_EQ(agent.at("min_memory_mib"), 12345);
  EXPECT_EQ(agent.at("max_utilization_pct"), 70);
  EXPECT_EQ(agent.at("allow_busy"), true);
  EXPECT_EQ(agent.at("mig"), "1g.10gb");
  const json seed = gpu_need_json(gpu_need_sample(), kSeedNeedKeys);
  EXPECT_EQ(seed.at("min_memory_mb"), 12345);  // the seeds' name; the value is MiB
  EXPECT_EQ(seed.at("max_utilization"), 70);
  EXPECT_TRUE(is_gpu_need_key("min_memory_mb", kSeedNeedKeys));
  EXPECT_FALSE(is_gpu_need_key("min_memory_mb", kAgentNeedKeys));
  EXPECT_FALSE(is_gpu_need_key("name", kSeedNeedKeys));
}

TEST(GpuNeedJson, AbsentKeysAreThePolicysDefaults) {
  auto n = gpu_need_from_json(json::object());
  ASSERT_TRUE(n);
  EXPECT_EQ(n->gpus, 1u);
  EXPECT_EQ(n->min_free_memory_mib, core::kDefaultMinFreeMemoryMib);
  EXPECT_EQ(n->max_utilization_pct, core::kDefaultMaxUtilizationPct);
  EXPECT_FALSE(n->allow_busy);
  EXPECT_TRUE(n->mig_profile.empty());
  auto whole = gpu_need_from_json(json{{"gpus", 3.0}});  // an integral float is an integer
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->gpus, 3u);
}

TEST(GpuNeedJson, BadValuesAreRefusedNamingTheKey) {
  struct Case {
    json body;
    const char* says;
  };
  for (const Case& c :
       {Case{{{"gpus", 0}}, "gpus must be from 1 to 1024 (got 0)"},
        Case{{{"gpus", 1025}}, "gpus must be from 1 to 1024"}, Case{{{"gpus", "2"}}, "gpus must be an integer"},
        Case{{{"gpus", 1.5}}, "gpus must be an integer"}, Case{{{"min_memory_mb", -1}}, "min_memory_mb must be from 0"},
        Case{{{"max_utilization", 101}}, "max_utilization must be from 0 to 100"},
        Case{{{"allow_busy", "yes"}}, "allow_busy must be true or false"},
        Case{{{"mig", 5}}, "mig must be a MIG profile"}, Case{{{"mig", "\x1b[31m"}}, "mig must be a MIG profile"},
        Case{{{"mig", ""}}, "mig must be a MIG profile"}}) {
    auto n = gpu_need_from_json(c.body, kSeedNeedKeys);
    ASSERT_FALSE(n) << c.body.dump();
    EXPECT_EQ(n.error().kind, ErrorKind::Invalid);
    EXPECT_NE(n.error().message.find(c.says), std::string::npos) << c.body.dump() << ": " << n.error().message;
  }
  EXPECT_FALSE(gpu_need_from_json(json::array()));
}

}  // namespace
}  // namespace gf::wire
