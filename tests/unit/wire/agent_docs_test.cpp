#include "wire/agent_docs.hpp"

#include <gtest/gtest.h>

#include "core/policy.hpp"
#include "core/score.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

core::GpuReading gpu(unsigned i, unsigned util, std::uint64_t free_mib) {
  core::GpuReading g;
  g.index = i;
  g.name = "Test GPU";
  g.uuid = "GPU-" + std::to_string(i);
  g.memory_total_mib = 80000;
  g.memory_free_mib = free_mib;
  g.memory_used_mib = 80000 - free_mib;
  g.utilization_pct = util;
  g.temperature_c = 40 + static_cast<int>(i);
  g.power_draw_w = 100.0;
  g.availability_score = core::availability_score(g);
  return g;
}

core::Snapshot snapshot() {
  core::Snapshot s;
  s.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  s.backend = "sim";
  s.simulated = true;
  s.gpus = {gpu(0, core::kDefaultMaxUtilizationPct, 70000), gpu(1, core::kDefaultMaxUtilizationPct + 1, 70000),
            gpu(2, 0, 2000)};
  core::GpuReading lost;
  lost.index = 3;
  lost.health = core::Health::Lost;
  s.gpus.push_back(lost);
  return s;
}

TEST(AgentDocs, SummaryCountsExactlyTheCeilingAsAvailable) {
  const auto j = summary_json(snapshot(), "node-a", 2);
  EXPECT_EQ(j.at("node"), "node-a");
  EXPECT_EQ(j.at("gpu_count"), 4);
  EXPECT_EQ(j.at("available_gpus"), 2);  // 50 % and 0 %: available ≤ 50 % (core/policy.hpp)
  EXPECT_EQ(j.at("busy_gpus"), 1);       // 51 %
  EXPECT_EQ(j.at("lost_gpus"), 1);
  EXPECT_EQ(j.at("memory").at("total"), 240000);
  EXPECT_EQ(j.at("memory").at("free"), 142000);
  EXPECT_EQ(j.at("busiest_gpu").at("index"), 1);
  EXPECT_EQ(j.at("temperature_max"), 42);
  EXPECT_EQ(j.at("power_total"), 300.0);
  EXPECT_EQ(j.at("alerts_firing"), 2);
  EXPECT_EQ(j.at("timestamp"), "2023-11-14T22:13:20.000000Z");
}

TEST(AgentDocs, SummaryOfNoReadingsIsNull) {
  core::Snapshot s;
  const auto j = summary_json(s, "n", 0);
  EXPECT_TRUE(j.at("memory").at("total").is_null());
  EXPECT_TRUE(j.at("utilization_avg").is_null());
  EXPECT_TRUE(j.at("busiest_gpu").is_null());
}

TEST(AgentDocs, AvailabilityListsEveryGpuAndTheChoice) {
  const auto s = snapshot();
  allocator::SelectRequest r;
  r.need.gpus = 1;
  const auto a = allocator::check_availability(s, core::Topology{}, r);
  const auto j = availability_json(a, s);
  EXPECT_EQ(j.at("available"), true);
  EXPECT_EQ(j.at("needed"), 1);
  EXPECT_EQ(j.at("qualifying"), 1);  // GPU 0 only: 1 is over the ceiling, 2 under the floor, 3 lost
  EXPECT_EQ(j.at("min_memory_mb"), core::kDefaultMinFreeMemoryMib);
  EXPECT_EQ(j.at("max_utilization"), core::kDefaultMaxUtilizationPct);
  ASSERT_EQ(j.at("gpus").size(), 4u);
  EXPECT_EQ(j.at("gpus")[0].at("qualifies"), true);
  EXPECT_TRUE(j.at("gpus")[0].at("reason").is_null());
  EXPECT_EQ(j.at("gpus")[1].at("qualifies"), false);
  EXPECT_NE(j.at("gpus")[1].at("reason").get<std::string>().find("51 % > 50 %"), std::string::npos) << j.dump();
  EXPECT_TRUE(j.at("gpus")[3].at("memory_free_mb").is_null());
  EXPECT_EQ(j.at("would_choose").at("indices"), json::array({0}));

  r.need.gpus = 2;
  const auto none = availability_json(allocator::check_availability(s, core::Topology{}, r), s);
  EXPECT_EQ(none.at("available"), false);
  EXPECT_TRUE(none.at("would_choose").is_null());
}

TEST(AgentDocs, AvailabilityDescribedInWords) {
  const auto s = snapshot();
  allocator::SelectRequest r;
  r.need.gpus = 2;
  const auto text = allocator::describe(allocator::check_availability(s, core::Topology{}, r));
  EXPECT_EQ(text.rfind("1 of 4 GPUs qualify, 2 needed (8000 MiB free, at most 50 % busy): not available", 0), 0u)
      << text;
  EXPECT_NE(text.find("\n  GPU 0 qualifies"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  GPU 3 does not: lost"), std::string::npos) << text;
}

TEST(AgentDocs, JobRowColumnsWinOverTheRecord) {
  core::Job job;
  job.id = "j1";
  job.name = "train";
  job.status = "lost";
  job.command = R"(["python3","train.py"])";
  job.started_at_ms = 1700000000000;
  job.lease_id = "l1";
  job.record = R"({"status":"running","gpu_info":{"count":1}})";
  auto j = job_json(job);
  EXPECT_EQ(j.at("status"), "lost");
  EXPECT_EQ(j.at("gpu_info").at("count"), 1);
  EXPECT_EQ(j.at("command"), json::array({"python3", "train.py"}));
  EXPECT_TRUE(j.at("exit_code").is_null());
  EXPECT_TRUE(j.at("ended_at").is_null());
  EXPECT_EQ(j.at("lease_id"), "l1");
  EXPECT_EQ(j.at("started_at"), "2023-11-14T22:13:20.000000Z");

  job.record = "not json";
  job.command = "not json either";
  job.exit_code = 3;
  job.lease_id.clear();
  j = job_json(job);
  EXPECT_EQ(j.at("command"), "not json either");
  EXPECT_EQ(j.at("exit_code"), 3);
  EXPECT_FALSE(j.contains("lease_id"));

  const auto list = jobs_json("n", {job, job});
  EXPECT_EQ(list.at("node"), "n");
  EXPECT_EQ(list.at("jobs").size(), 2u);
}

TEST(AgentDocs, LeasesAndWaiters) {
  core::Lease l;
  l.id = "l1";
  l.gpus = {{0, "GPU-0"}};
  core::Waiter w;
  w.id = "w1";
  w.name = "big";
  w.priority = 5;
  w.gpus = 4;
  w.owner = {77, 1, "bob"};
  w.enqueued_at_ms = 1700000000000;
  const auto j = leases_json("n", {l}, {w});
  EXPECT_EQ(j.at("leases").size(), 1u);
  EXPECT_EQ(j.at("leases")[0].at("id"), "l1");
  ASSERT_EQ(j.at("waiting").size(), 1u);
  EXPECT_EQ(j.at("waiting")[0].at("owner").at("user"), "bob");
  EXPECT_EQ(j.at("waiting")[0].at("priority"), 5);
  EXPECT_EQ(j.at("waiting")[0].at("enqueued_at"), "2023-11-14T22:13:20.000000Z");
}

TEST(AgentDocs, JobsPageCarriesItsPaging) {
  core::JobPage page;
  core::Job job;
  job.id = "j1";
  job.status = "succeeded";
  job.started_at_ms = 1700000000000;
  page.jobs = {job};
  page.total = 42;
  const auto j = jobs_page_json("n", page, 10, 20);
  EXPECT_EQ(j.at("node"), "n");
  ASSERT_EQ(j.at("jobs").size(), 1u);
  EXPECT_EQ(j.at("jobs")[0].at("id"), "j1");
  EXPECT_EQ(j.at("total"), 42);
  EXPECT_EQ(j.at("limit"), 10);
  EXPECT_EQ(j.at("offset"), 20);
  EXPECT_EQ(j.size(), 5u) << j;
}

TEST(AgentDocs, TasksSumsWithOwnerAndRoundedGpuHours) {
  core::TaskPage page;
  core::TaskTotals t;
  t.task = "grid";
  t.runs = 4;
  t.succeeded = 2;
  t.failed = 1;
  t.running = 1;
  t.gpu_hours = 1.234567;
  t.last_started_ms = 1700000000000;
  t.owner_uid = 1000;
  t.owner_user = "alice";
  core::TaskTotals anon;
  anon.task = "other";
  page.tasks = {t, anon};
  page.total = 7;
  const auto j = tasks_json("n", page, 100, 0);
  EXPECT_EQ(j, json::parse(R"({"node": "n", "total": 7, "limit": 100, "offset": 0, "tasks": [
    {"task": "grid", "user": "alice", "uid": 1000, "runs": 4, "succeeded": 2, "failed": 1, "running": 1,
     "gpu_hours": 1.2346, "last_started_at": "2023-11-14T22:13:20.000000Z"},
    {"task": "other", "user": "", "uid": null, "runs": 0, "succeeded": 0, "failed": 0, "running": 0,
     "gpu_hours": 0.0, "last_started_at": "1970-01-01T00:00:00.000000Z"}]})"));
}

TEST(AgentDocs, ReleasedAndEstimate) {
  EXPECT_EQ(released_json("l1"), json::parse(R"({"id": "l1", "released": true})"));
  EXPECT_EQ(estimate_json(2, 40000, 0.9, "vllm", "tp 2", "weights", {"parameter 'tps' looks like …"}),
            json::parse(R"({"gpus": 2, "memory_mb_per_gpu": 40000, "memory_fraction": 0.9, "engine": "vllm",
                            "method": "weights", "explanation": "tp 2",
                            "warnings": ["parameter 'tps' looks like …"]})"));
  EXPECT_TRUE(estimate_json(1, 8000, std::nullopt, "default", "", "seed", {}).at("memory_fraction").is_null());
}

TEST(AgentDocs, AllocationCarriesTheSeedsGpuInfo) {
  const auto s = snapshot();
  allocator::Selection sel;
  sel.indices = {0, 2};
  sel.method = "availability score";
  sel.why = {"GPU 0: best", "GPU 2: next"};
  core::Lease l;
  l.id = "l9";
  l.gpus = {{0, "GPU-0"}, {2, "GPU-2"}};
  const auto j = allocation_json(l, sel, s, 2);
  EXPECT_EQ(j.at("id"), "l9");
  EXPECT_EQ(j.at("cuda_visible_devices"), "0,2");
  EXPECT_EQ(j.at("why").size(), 2u);
  const auto& info = j.at("gpu_info");
  EXPECT_EQ(info.at("model"), "Test GPU");
  EXPECT_EQ(info.at("device_ids"), json::array({"0", "2"}));
  EXPECT_EQ(info.at("world_size"), 2);
  EXPECT_EQ(info.at("gpu_info").at("allocation_method"), "availability score");
  ASSERT_EQ(info.at("gpu_info").at("details").size(), 2u);
  const double score = info.at("gpu_info").at("details")[0].at("availability_score").get<double>();
  EXPECT_DOUBLE_EQ(score, std::round(*s.gpus[0].availability_score * 1e4) / 1e4);
}

TEST(AgentDocs, HealthSaysDegradedWithProblems) {
  HealthFacts h;
  h.node = "n";
  h.uptime_s = 12.345;
  h.backend_name = "sim";
  h.backend_ok = true;
  h.store_path = "/x.db";
  h.last_collection_age_s = 0.12345;
  auto j = health_json(h);
  EXPECT_EQ(j.at("status"), "ok");
  EXPECT_EQ(j.at("uptime_s"), 12.3);
  EXPECT_TRUE(j.at("backend").at("error").is_null());
  EXPECT_TRUE(j.at("backend").at("gpus").is_null());
  EXPECT_EQ(j.at("backend").at("last_collection_age_s"), 0.123);
  EXPECT_EQ(j.at("store").at("path"), "/x.db");
  h.problems = {"history writes fail: disk full"};
  h.store_error = "disk full";
  const auto s = snapshot();
  h.latest = &s;
  j = health_json(h);
  EXPECT_EQ(j.at("status"), "degraded");
  EXPECT_EQ(j.at("store").at("error"), "disk full");
  EXPECT_EQ(j.at("backend").at("gpus"), 4);
}

TEST(AgentDocs, AlertsDocumentListsRules) {
  const auto rules = core::default_alert_rules();
  const auto j = alerts_doc_json("n", {}, {}, rules);
  EXPECT_TRUE(j.at("firing").empty());
  ASSERT_EQ(j.at("rules").size(), rules.size());
  EXPECT_EQ(j.at("rules")[0].at("rule"), core::rule_name(rules[0].kind));
  EXPECT_EQ(j.at("rules")[0].at("duration_s"), std::chrono::duration<double>(rules[0].duration).count());
}

TEST(AgentDocs, HistoryDocumentNamesTheMetricItsUnitAndRoundsPoints) {
  using namespace std::chrono;
  core::HistoryPoint with{1700000000000, 41.256, 40.0, 43.0049, 3};
  core::HistoryPoint without{1700000060000, std::nullopt, std::nullopt, std::nullopt, 0};
  const system_clock::time_point since(seconds(1700000000)), until(seconds(1700000120));
  const json j = history_json(core::Field::PowerDraw, "n1", since, until, seconds(60), {{3, {with, without}}});
  EXPECT_EQ(j["metric"], "power");
  EXPECT_EQ(j["unit"], "W");
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["step_s"], 60);
  EXPECT_EQ(j["since"], "2023-11-14T22:13:20.000000Z");
  ASSERT_EQ(j["series"].size(), 1u);
  EXPECT_EQ(j["series"][0]["gpu"], 3);
  const auto& pts = j["series"][0]["points"];
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0]["t"], 1700000000000);
  EXPECT_DOUBLE_EQ(pts[0]["avg"].get<double>(), 41.26);
  EXPECT_DOUBLE_EQ(pts[0]["max"].get<double>(), 43.0);
  EXPECT_EQ(pts[0]["samples"], 3);
  EXPECT_TRUE(pts[1]["avg"].is_null());  // sampled but not reported: null, never 0
  EXPECT_EQ(pts[1]["samples"], 0);
}

}  // namespace
}  // namespace gf::wire
