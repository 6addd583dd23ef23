// The agent's documents and the job_put argument back into core types (wire/json.hpp,
// wire/agent_docs.hpp, wire/agent_protocol.hpp): every decoder reads exactly what its encoder writes,
// and sends an error or a default where the other side sends something odd, never an exception.
#include <gtest/gtest.h>

#include <variant>

#include "wire/agent_docs.hpp"
#include "wire/agent_protocol.hpp"
#include "wire/json.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

TEST(AgentCodec, TimesAreIsoUtcOrEpochMilliseconds) {
  EXPECT_EQ(ms_time_from_json(json("1970-01-01T00:00:01.5Z")), 1500);
  EXPECT_EQ(ms_time_from_json(json("2025-01-02T03:04:05.678000Z")), 1735787045678);
  EXPECT_EQ(ms_time_from_json(json("2025-01-02T03:04:05Z")), 1735787045000);
  EXPECT_EQ(ms_time_from_json(json(1234)), 1234);
  for (const char* bad : {"", "2025-01-02", "2025-01-02T03:04:05", "2025-01-02T03:04:05+01:00", "2025-0a-02T03:04:05Z",
                          "2025-01-02T03:04:05.1Zjunk"})
    EXPECT_FALSE(ms_time_from_json(json(bad))) << bad;
  EXPECT_FALSE(ms_time_from_json(json(nullptr)));
  EXPECT_FALSE(ms_time_from_json(json::array()));
}

TEST(AgentCodec, LeaseRoundTripsAndOddTypesDoNotThrow) {
  const json l{{"id", "L1"},
               {"job_id", "J"},
               {"name", "n"},
               {"gpus", {{{"index", 3}, {"uuid", "GPU-3"}}}},
               {"owner", {{"pid", 42}, {"user", "alice"}, {"uid", 1001}}},
               {"created_at", "2025-01-02T03:04:05.678Z"},
               {"released_at", nullptr},
               {"release_reason", nullptr},
               {"tie", "connection"}};
  auto lease = lease_from_json(l);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->id, "L1");
  ASSERT_EQ(lease->gpus.size(), 1u);
  EXPECT_EQ(lease->gpus[0].index, 3u);
  EXPECT_EQ(lease->owner.user, "alice");
  EXPECT_EQ(lease->created_at_ms, 1735787045678);
  EXPECT_FALSE(lease->released_at_ms);

  EXPECT_FALSE(lease_from_json(json::array()));
  EXPECT_FALSE(lease_from_json(json{{"id", 5}}));
  json odd = l;
  odd["gpus"] = "all";
  odd["owner"] = 7;
  odd["name"] = json::array();
  odd["created_at"] = true;
  auto o = lease_from_json(odd);
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->gpus.empty());
  EXPECT_EQ(o->created_at_ms, 0);
}

TEST(AgentCodec, JobFromTheAgentsRecordShape) {
  const json rec{{"id", "J1"},
                 {"name", "t"},
                 {"status", "succeeded"},
                 {"exit_code", 0},
                 {"lease_id", "L"},
                 {"started_at", "1970-01-01T00:00:01Z"},
                 {"ended_at", nullptr},
                 {"gpu_info", {{"count", 1}}}};
  auto j = job_from_json(rec);
  EXPECT_EQ(j.id, "J1");
  EXPECT_EQ(j.started_at_ms, 1000);
  EXPECT_FALSE(j.ended_at_ms);
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_EQ(json::parse(j.record)["gpu_info"]["count"], 1);  // the record is the object itself
  auto odd = job_from_json(json{{"id", 3}, {"exit_code", "x"}, {"command", 5}});
  EXPECT_TRUE(odd.id.empty());
  EXPECT_FALSE(odd.exit_code);
}

core::Lease full_lease() {
  core::Lease l;
  l.id = "L7";
  l.job_id = "J7";
  l.name = "train";
  l.gpus = {{0, "GPU-0"}, {3, "GPU-3"}};
  l.owner.pid = 4242;
  l.owner.user = "alice";
  l.owner.uid = 1001;
  l.created_at_ms = 1735787045678;
  l.released_at_ms = 1735787099001;
  l.release_reason = "released";
  l.tie = core::LeaseTie::Process;
  return l;
}

void expect_same_lease(const core::Lease& a, const core::Lease& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.name, b.name);
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (std::size_t i = 0; i < a.gpus.size(); ++i) {
    EXPECT_EQ(a.gpus[i].index, b.gpus[i].index);
    EXPECT_EQ(a.gpus[i].uuid, b.gpus[i].uuid);
  }
  EXPECT_EQ(a.owner.pid, b.owner.pid);
  EXPECT_EQ(a.owner.user, b.owner.user);
  EXPECT_EQ(a.owner.uid, b.owner.uid);
  EXPECT_EQ(a.created_at_ms, b.created_at_ms);
  EXPECT_EQ(a.released_at_ms, b.released_at_ms);
  EXPECT_EQ(a.release_reason, b.release_reason);
  EXPECT_EQ(a.tie, b.tie);
}

TEST(AgentCodec, LeaseJsonRoundTrips) {
  const core::Lease l = full_lease();
  auto back = lease_from_json(lease_json(l));
  ASSERT_TRUE(back) << back.error().message;
  expect_same_lease(*back, l);

  core::Lease bare;  // no owner uid, not released, no tie
  bare.id = "L8";
  bare.created_at_ms = 1;
  auto b = lease_from_json(lease_json(bare));
  ASSERT_TRUE(b) << b.error().message;
  expect_same_lease(*b, bare);
}

TEST(AgentCodec, WaiterJsonRoundTrips) {
  core::Waiter w;
  w.id = "W1";
  w.name = "sweep";
  w.priority = -3;
  w.gpus = 4;
  w.enqueued_at_ms = 1735787045678;
  w.owner.pid = 17;
  w.owner.user = "bob";
  w.owner.uid = 1002;
  const core::Waiter back = waiter_from_json(waiter_json(w));
  EXPECT_EQ(back.id, w.id);
  EXPECT_EQ(back.name, w.name);
  EXPECT_EQ(back.priority, w.priority);
  EXPECT_EQ(back.gpus, w.gpus);
  EXPECT_EQ(back.enqueued_at_ms, w.enqueued_at_ms);
  EXPECT_EQ(back.owner.pid, w.owner.pid);
  EXPECT_EQ(back.owner.user, w.owner.user);
  EXPECT_EQ(back.owner.uid, w.owner.uid);
  EXPECT_TRUE(waiter_from_json(json::array()).id.empty());
}

core::Job full_job() {
  core::Job j;
  j.id = "J9";
  j.name = "train";
  j.status = "failed";
  j.command = R"(["python","train.py"])";
  j.exit_code = 3;
  j.started_at_ms = 1735787045678;
  j.ended_at_ms = 1735787099001;
  j.lease_id = "L9";
  j.task = "grid-1";
  j.record = R"({"gpu_info":{"count":2}})";
  return j;
}

void expect_same_job_columns(const core::Job& a, const core::Job& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(json::parse(a.command), json::parse(b.command));
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.started_at_ms, b.started_at_ms);
  EXPECT_EQ(a.ended_at_ms, b.ended_at_ms);
  EXPECT_EQ(a.lease_id, b.lease_id);
  EXPECT_EQ(a.task, b.task);
}

TEST(AgentCodec, JobJsonRoundTripsItsColumns) {
  const core::Job j = full_job();
  const core::Job back = job_from_json(job_json(j));
  expect_same_job_columns(back, j);
  // job_json lays the columns over the record: the record read back is that whole document.
  EXPECT_EQ(json::parse(back.record)["gpu_info"]["count"], 2);
}

TEST(AgentCodec, JobPutArgumentRoundTripsThroughTheProtocolParser) {
  core::Job j = full_job();
  const json line{{"id", 1}, {"op", "job_put"}, {"job", job_to_json(j)}};
  const auto req = parse_agent_request(line.dump());
  ASSERT_TRUE(req.op) << req.op.error().message;
  const auto* put = std::get_if<JobPutArgs>(&*req.op);
  ASSERT_NE(put, nullptr);
  expect_same_job_columns(put->job, j);
  EXPECT_EQ(json::parse(put->job.record), json::parse(j.record));
  // And job_from_json reads the same argument (the client's own records go through it).
  const core::Job back = job_from_json(job_to_json(j));
  expect_same_job_columns(back, j);
  EXPECT_EQ(json::parse(back.record), json::parse(j.record));
}

}  // namespace
}  // namespace gf::wire
