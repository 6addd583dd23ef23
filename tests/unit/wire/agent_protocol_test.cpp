// The agent socket's request parser (docs/agent-socket.md): typed requests, clear errors, bounded input.
#include "wire/agent_protocol.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gf::wire {
namespace {

TEST(AgentProtocol, ParsesAnAcquireWithItsArguments) {
  auto r = parse_agent_request(
      R"({"id": 7, "op": "acquire", "gpus": 2, "wait_s": 1.5, "tie": "parent", "priority": 3, "name": "train"})");
  ASSERT_TRUE(r.op) << r.op.error().message;
  EXPECT_EQ(r.id, 7);
  const auto& a = std::get<AcquireArgs>(*r.op);
  EXPECT_EQ(a.gpus, 2u);
  EXPECT_DOUBLE_EQ(a.wait_s, 1.5);
  EXPECT_EQ(a.tie, core::LeaseTie::Process);
  EXPECT_EQ(a.priority, 3);
  EXPECT_EQ(a.name, "train");
}

TEST(AgentProtocol, BadArgumentsAreErrorsThatKeepTheId) {
  for (const char* line : {R"({"id": 1, "op": "acquire", "gpus": 0})", R"({"id": 1, "op": "acquire", "gpus": "2"})",
                           R"({"id": 1, "op": "acquire", "tie": "forever"})",
                           R"({"id": 1, "op": "acquire", "wait_s": -1})", R"({"id": 1, "op": "acquire", "owner": 0})",
                           R"({"id": 1, "op": "release"})", R"({"id": 1, "op": "cancel", "target": "x"})",
                           R"({"id": 1, "op": "job"})", R"({"id": 1, "op": "get", "path": "api"})",
                           R"({"id": 1, "op": "jobs", "limit": 0})", R"({"id": 1, "op": "explode"})"}) {
    auto r = parse_agent_request(line);
    EXPECT_FALSE(r.op) << line;
    EXPECT_EQ(r.id, 1) << line;
    EXPECT_FALSE(r.close) << line;
    if (!r.op) {
      EXPECT_EQ(r.op.error().kind, ErrorKind::Invalid) << line;
    }
  }
}

TEST(AgentProtocol, IdsMustBeIntegers) {
  for (const char* line : {R"({"id": "1", "op": "leases"})", R"({"id": 1.5, "op": "leases"})", R"({"op": "leases"})",
                           R"({"id": 18446744073709551615, "op": "leases"})"}) {
    auto r = parse_agent_request(line);
    EXPECT_FALSE(r.op) << line;
    EXPECT_FALSE(r.id) << line;
  }
}

TEST(AgentProtocol, NotAnObjectOrTooLongClosesTheConnection) {
  for (std::string line : {std::string("[1,2]"), std::string("not json"), std::string(kMaxRequestLine + 1, ' ')}) {
    auto r = parse_agent_request(line);
    EXPECT_FALSE(r.op);
    EXPECT_TRUE(r.close);
  }
}

TEST(AgentProtocol, JobPutKeepsCommandAndRecordAsJsonText) {
  auto r = parse_agent_request(
      R"({"id": 2, "op": "job_put", "job": {"status": "running", "command": ["a", "b c"], "record": {"k": 1}}})");
  ASSERT_TRUE(r.op) << r.op.error().message;
  const auto& j = std::get<JobPutArgs>(*r.op).job;
  EXPECT_EQ(j.status, "running");
  EXPECT_EQ(nlohmann::json::parse(j.command), nlohmann::json::array({"a", "b c"}));
  EXPECT_EQ(nlohmann::json::parse(j.record)["k"], 1);
  EXPECT_FALSE(j.owner.uid) << "the owner never comes from the request";
  EXPECT_FALSE(parse_agent_request(R"({"id": 2, "op": "job_put", "job": {"status": "x", "command": [1]}})").op);
}

// Review of issue 14: INT64_MAX times overflowed the task totals' sums and the conversion to clock
// values; an end before the start (a clock step) is a run of no time, not a negative one.
TEST(AgentProtocol, JobPutTimesAreBounded) {
  auto far = parse_agent_request(
      R"({"id": 3, "op": "job_put", "job": {"status": "running", "started_at_ms": 9223372036854775807}})");
  ASSERT_FALSE(far.op);
  EXPECT_NE(far.op.error().message.find("started_at_ms"), std::string::npos) << far.op.error().message;
  EXPECT_FALSE(
      parse_agent_request(R"({"id": 3, "op": "job_put", "job": {"status": "x", "ended_at_ms": 253402300800000}})").op);
  auto back = parse_agent_request(
      R"({"id": 3, "op": "job_put", "job": {"status": "succeeded", "started_at_ms": 5000, "ended_at_ms": 4000}})");
  ASSERT_TRUE(back.op) << back.op.error().message;
  const auto& j = std::get<JobPutArgs>(*back.op).job;
  EXPECT_EQ(j.ended_at_ms.value_or(-1), 5000);
}

TEST(AgentProtocol, RepliesAreOneLineAndEscapeBadUtf8) {
  const std::string ok = ok_line(3, {{"job_id", "abc"}});
  EXPECT_EQ(ok.back(), '\n');
  auto j = nlohmann::json::parse(ok);
  EXPECT_EQ(j["id"], 3);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["job_id"], "abc");
  const std::string err = error_line(std::nullopt, make_error(ErrorKind::Permission, "bad \xff byte\nsecond"));
  EXPECT_EQ(err.find('\n'), err.size() - 1) << "one line";
  auto e = nlohmann::json::parse(err);
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_EQ(e["error"]["kind"], "permission");
}

}  // namespace
}  // namespace gf::wire
