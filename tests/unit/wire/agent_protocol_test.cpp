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
  EXPECT_EQ(a.need.gpus, 2u);
  EXPECT_EQ(a.wait, std::chrono::milliseconds(1500));
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

// The results the socket sends for leases, job_put, jobs, job and get (docs/agent-socket.md).
TEST(AgentProtocol, ResultsOfTheReadRequests) {
  core::Lease l;
  l.id = "l1";
  l.gpus = {{0, "GPU-0"}};
  core::Waiter w;
  w.id = "w1";
  w.gpus = 2;
  auto leases = leases_result_json({l}, {w});
  EXPECT_EQ(leases.size(), 2u) << leases;
  ASSERT_EQ(leases.at("leases").size(), 1u);
  EXPECT_EQ(leases.at("leases")[0].at("id"), "l1");
  ASSERT_EQ(leases.at("waiting").size(), 1u);
  EXPECT_EQ(leases.at("waiting")[0].at("id"), "w1");
  EXPECT_EQ(leases_result_json({}, {}), nlohmann::json::parse(R"({"leases": [], "waiting": []})"));

  EXPECT_EQ(job_put_result_json("j9"), nlohmann::json::parse(R"({"job_id": "j9"})"));
  core::Job job;
  job.id = "j1";
  job.status = "running";
  const auto jobs = jobs_result_json({job, job});
  EXPECT_EQ(jobs.size(), 1u);
  ASSERT_EQ(jobs.at("jobs").size(), 2u);
  EXPECT_EQ(jobs.at("jobs")[1].at("status"), "running");
  EXPECT_EQ(jobs_result_json({}), nlohmann::json::parse(R"({"jobs": []})"));
  const auto one = job_result_json(job);
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(one.at("job").at("id"), "j1");
}

TEST(AgentProtocol, GetResultKeepsTheBodyAsJsonOrText) {
  EXPECT_EQ(get_result_json(200, R"({"a": 1})"), nlohmann::json::parse(R"({"status": 200, "body": {"a": 1}})"));
  EXPECT_EQ(get_result_json(200, "# HELP x\n"), nlohmann::json({{"status", 200}, {"body", "# HELP x\n"}}));
  EXPECT_EQ(get_result_json(204, std::nullopt), nlohmann::json::parse(R"({"status": 204, "body": null})"));
}

}  // namespace
}  // namespace gf::wire
