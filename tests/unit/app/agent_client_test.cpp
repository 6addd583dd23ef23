// The agent protocol's documents back into core types (app/agent_client.hpp): exact where the agent is
// right, an error or a default where it sends something odd, never an exception.
#include "app/agent_client.hpp"

#include <gtest/gtest.h>

namespace {

using nlohmann::json;

TEST(AgentClientParse, TimesAreIsoUtcOrEpochMilliseconds) {
  EXPECT_EQ(gf::app::parse_time_ms(json("1970-01-01T00:00:01.5Z")), 1500);
  EXPECT_EQ(gf::app::parse_time_ms(json("2025-01-02T03:04:05.678000Z")), 1735787045678);
  EXPECT_EQ(gf::app::parse_time_ms(json("2025-01-02T03:04:05Z")), 1735787045000);
  EXPECT_EQ(gf::app::parse_time_ms(json(1234)), 1234);
  for (const char* bad : {"", "2025-01-02", "2025-01-02T03:04:05", "2025-01-02T03:04:05+01:00", "2025-0a-02T03:04:05Z",
                          "2025-01-02T03:04:05.1Zjunk"})
    EXPECT_FALSE(gf::app::parse_time_ms(json(bad))) << bad;
  EXPECT_FALSE(gf::app::parse_time_ms(json(nullptr)));
  EXPECT_FALSE(gf::app::parse_time_ms(json::array()));
}

TEST(AgentClientParse, LeaseRoundTripsAndOddTypesDoNotThrow) {
  const json l{{"id", "L1"},
               {"job_id", "J"},
               {"name", "n"},
               {"gpus", {{{"index", 3}, {"uuid", "GPU-3"}}}},
               {"owner", {{"pid", 42}, {"user", "alice"}, {"uid", 1001}}},
               {"created_at", "2025-01-02T03:04:05.678Z"},
               {"released_at", nullptr},
               {"release_reason", nullptr},
               {"tie", "connection"}};
  auto lease = gf::app::lease_from_json(l);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->id, "L1");
  ASSERT_EQ(lease->gpus.size(), 1u);
  EXPECT_EQ(lease->gpus[0].index, 3u);
  EXPECT_EQ(lease->owner.user, "alice");
  EXPECT_EQ(lease->created_at_ms, 1735787045678);
  EXPECT_FALSE(lease->released_at_ms);

  EXPECT_FALSE(gf::app::lease_from_json(json::array()));
  EXPECT_FALSE(gf::app::lease_from_json(json{{"id", 5}}));
  json odd = l;
  odd["gpus"] = "all";
  odd["owner"] = 7;
  odd["name"] = json::array();
  odd["created_at"] = true;
  auto o = gf::app::lease_from_json(odd);
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->gpus.empty());
  EXPECT_EQ(o->created_at_ms, 0);
}

TEST(AgentClientParse, JobFromTheAgentsRecordShape) {
  const json rec{{"id", "J1"},
                 {"name", "t"},
                 {"status", "succeeded"},
                 {"exit_code", 0},
                 {"lease_id", "L"},
                 {"started_at", "1970-01-01T00:00:01Z"},
                 {"ended_at", nullptr},
                 {"gpu_info", {{"count", 1}}}};
  auto j = gf::app::job_from_json(rec);
  EXPECT_EQ(j.id, "J1");
  EXPECT_EQ(j.started_at_ms, 1000);
  EXPECT_FALSE(j.ended_at_ms);
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_EQ(json::parse(j.record)["gpu_info"]["count"], 1);  // the record is the object itself
  auto odd = gf::app::job_from_json(json{{"id", 3}, {"exit_code", "x"}, {"command", 5}});
  EXPECT_TRUE(odd.id.empty());
  EXPECT_FALSE(odd.exit_code);
}

TEST(AgentClientParse, ErrorKindsByName) {
  EXPECT_EQ(gf::app::error_kind_from_name("permission"), gf::ErrorKind::Permission);
  EXPECT_EQ(gf::app::error_kind_from_name("unavailable"), gf::ErrorKind::Unavailable);
  EXPECT_EQ(gf::app::error_kind_from_name("not_found"), gf::ErrorKind::NotFound);
  EXPECT_EQ(gf::app::error_kind_from_name("something new"), gf::ErrorKind::Failed);
}

}  // namespace
