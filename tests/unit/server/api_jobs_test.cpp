// The lease and job routes (session, allocations through the arbiter, the lease list, job records, the
// estimate) through the Router, on the fixture of api_rig.hpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api_rig.hpp"
#include "store/history.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::server {
namespace {

using namespace std::chrono_literals;
using namespace api_test;

TEST_F(ApiTest, SessionSaysWhatTheCredentialsMayDo) {
  auto r = call(Method::Get, "/api/v1/session", {}, /*auth=*/false);
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("writer"), false);
  EXPECT_EQ(r.j.at("jobs_submit"), false);  // no submitter in this context: submission is off
  r = call(Method::Get, "/api/v1/session");
  EXPECT_EQ(r.j.at("writer"), true) << r;
  // Off: the job routes say so, whatever the token.
  r = post("/api/v1/jobs", R"({"image": "busybox"})");
  EXPECT_EQ(r.status, 403u) << r;
  EXPECT_EQ(r.j.value("error", ""), "submission_disabled");
}

// ---- allocations -------------------------------------------------------------------------------

TEST_F(ApiTest, AllocationValidation) {
  auto r = post("/api/v1/allocations", R"({"gpus":1})", /*auth=*/false);
  EXPECT_EQ(r.status, 401u) << r;
  r = post("/api/v1/allocations", R"({"gpus":1})", true, "text/plain");
  EXPECT_EQ(r.status, 415u) << r;
  EXPECT_EQ(r.j.at("error"), "unsupported_media_type");
  // curl -d's default type is accepted, the body must still be JSON.
  EXPECT_EQ(post("/api/v1/allocations", "gpus=1", true, "application/x-www-form-urlencoded").status, 400u);

  struct Case {
    const char* body;
    const char* says;
  };
  for (const Case& c :
       {Case{"not json", "not valid JSON"}, Case{"[1]", "JSON object"}, Case{"", "not valid JSON"},
        Case{R"({"gpu":1})", "unknown field 'gpu'"}, Case{R"({"gpus":"2"})", "gpus must be an integer"},
        Case{R"({"gpus":1.5})", "gpus must be an integer"}, Case{R"({"gpus":0})", "gpus must be from 1"},
        Case{R"({"gpus":2000})", "gpus"}, Case{R"({"max_utilization":101})", "max_utilization"},
        Case{R"({"min_memory_mb":-1})", "min_memory_mb"}, Case{R"({"allow_busy":"yes"})", "allow_busy"},
        Case{R"({"name":5})", "name must be a string"}, Case{R"({"pid":"me"})", "pid"},
        Case{R"({"pid":2147483647})", "no process"}}) {
    r = post("/api/v1/allocations", c.body);
    EXPECT_EQ(r.status, 400u) << c.body << ": " << r;
    EXPECT_EQ(r.j.value("error", ""), "bad_request") << c.body;
    EXPECT_NE(r.message().find(c.says), std::string::npos) << c.body << ": " << r;
  }
  // Nothing was leased by any of that.
  EXPECT_TRUE(get("/api/v1/leases").j.at("leases").empty());
}

TEST_F(ApiTest, AllocateListReleaseRelease) {
  auto r = post("/api/v1/allocations", R"({"gpus":1,"name":"unit test"})", true, "application/json; charset=utf-8");
  ASSERT_EQ(r.status, 201u) << r;
  const std::string id = r.j.at("id");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(r.header("Location"), "/api/v1/allocations/" + id);
  EXPECT_EQ(r.j.at("name"), "unit test");
  ASSERT_EQ(r.j.at("gpus").size(), 1u);
  EXPECT_EQ(r.j["gpus"][0].at("index"), 0);  // the only GPU under 50 % with 8000 MiB free
  EXPECT_EQ(r.j.at("cuda_visible_devices"), "0");
  EXPECT_EQ(r.j.at("owner").at("pid"), ::getpid());
  EXPECT_EQ(r.j.at("gpu_info").at("count"), 1);
  EXPECT_TRUE(r.j.at("released_at").is_null());

  auto leases = get("/api/v1/leases");
  ASSERT_EQ(leases.status, 200u);
  ASSERT_EQ(leases.j.at("leases").size(), 1u);
  EXPECT_EQ(leases.j["leases"][0].at("id"), id);
  // The leased GPU no longer qualifies, and a second lease finds nothing.
  auto avail = get("/api/v1/availability");
  EXPECT_EQ(avail.j.at("available"), false);
  EXPECT_NE(avail.j["gpus"][0].at("reason").get<std::string>().find("leased"), std::string::npos) << avail;
  auto second = post("/api/v1/allocations", R"({"gpus":1})");
  EXPECT_EQ(second.status, 409u) << second;

  EXPECT_EQ(call(Method::Delete, "/api/v1/allocations/" + id, {}, false).status, 401u);
  r = call(Method::Delete, "/api/v1/allocations/" + id);
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("id"), id);
  EXPECT_EQ(r.j.at("released"), true);
  r = call(Method::Delete, "/api/v1/allocations/" + id);
  EXPECT_EQ(r.status, 404u) << r;
  EXPECT_EQ(r.j.at("error"), "not_found");
  EXPECT_EQ(call(Method::Delete, "/api/v1/allocations/" + std::string(65, 'a')).status, 400u);

  EXPECT_TRUE(get("/api/v1/leases").j.at("leases").empty());
  auto all = get("/api/v1/leases?all=1");
  ASSERT_EQ(all.j.at("leases").size(), 1u);
  EXPECT_FALSE(all.j["leases"][0].at("released_at").is_null());
  EXPECT_EQ(post("/api/v1/allocations", R"({"gpus":1})").status, 201u);  // free again
}

TEST_F(ApiTest, NotEnoughGpusIs409) {
  auto r = post("/api/v1/allocations", R"({"gpus":2})");
  EXPECT_EQ(r.status, 409u) << r;
  EXPECT_EQ(r.j.at("error"), "insufficient_gpus");
  r = post("/api/v1/allocations", R"({"gpus":2,"max_utilization":90})");
  EXPECT_EQ(r.status, 201u) << r;
  EXPECT_EQ(r.j.at("cuda_visible_devices"), "0,1");
}

// ---- jobs, estimate ------------------------------------------------------------------------------

TEST_F(ApiTest, JobsAndExperiments) {
  auto r = get("/api/v1/jobs");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("jobs").empty());
  EXPECT_EQ(get("/api/v1/jobs?limit=0").status, 400u);
  r = get("/api/v1/experiments/nope");
  EXPECT_EQ(r.status, 404u) << r;
  EXPECT_EQ(get("/api/v1/experiments/" + std::string(65, 'x')).status, 400u);
  // /api/v1/jobs/{id} is the same route under the one word.
  r = get("/api/v1/jobs/nope");
  EXPECT_EQ(r.status, 404u) << r;
  EXPECT_EQ(r.j.at("error"), "not_found");
  EXPECT_EQ(r.j.at("message"), "no job nope (see GET /api/v1/jobs)");
  EXPECT_EQ(get("/api/v1/jobs/" + std::string(65, 'x')).status, 400u);

  // A recorded job is listed, and found under both names.
  core::Job job;
  job.id = "j42";
  job.name = "train";
  job.status = "succeeded";
  job.command = R"(["true"])";
  job.exit_code = 0;
  job.started_at_ms = 1700000000000;
  job.ended_at_ms = 1700000001000;
  job.record = "{}";
  put_job(job);
  r = get("/api/v1/jobs");
  ASSERT_EQ(r.j.at("jobs").size(), 1u) << r;
  EXPECT_EQ(r.j.at("jobs")[0].at("id"), "j42");
  for (const char* path : {"/api/v1/jobs/j42", "/api/v1/experiments/j42"}) {
    r = get(path);
    ASSERT_EQ(r.status, 200u) << path << r;
    EXPECT_EQ(r.j.at("status"), "succeeded");
    EXPECT_EQ(r.j.at("exit_code"), 0);
  }
}

TEST_F(ApiTest, JobsPagesFiltersAndTasks) {
  for (int i = 0; i < 5; ++i) {
    // Field by field: GCC -O3 warns maybe-uninitialized on a brace-initialised Job's owner.
    core::Job job;
    job.id = fmt::format("j{}", i);
    job.name = "run";
    job.status = i == 4 ? "failed" : "succeeded";
    job.command = "[]";
    job.exit_code = 0;
    job.started_at_ms = 1700000000000 + i * 1000;
    job.ended_at_ms = 1700000000000 + i * 1000 + 3600000;
    job.record =
        R"({"gpu_info":{"count":1},"metrics":{"gpu_monitoring":{"sample_count":2,"series":{"0":{"t":[0,1]}}}}})";
    job.owner.user = i % 2 ? "bob" : "alice";
    job.owner.uid = 1000u + static_cast<unsigned>(i % 2);
    job.task = i < 3 ? "grid" : "";
    put_job(job);
  }
  auto r = get("/api/v1/jobs?limit=2&offset=1");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("total"), 5);
  EXPECT_EQ(r.j.at("limit"), 2);
  EXPECT_EQ(r.j.at("offset"), 1);
  ASSERT_EQ(r.j.at("jobs").size(), 2u);
  EXPECT_EQ(r.j.at("jobs")[0].at("id"), "j3");
  EXPECT_EQ(r.j.at("jobs")[0].at("user"), "bob");
  EXPECT_EQ(r.j.at("jobs")[0].at("uid"), 1001);
  EXPECT_TRUE(r.j.at("jobs")[0].at("metrics").at("gpu_monitoring").contains("series"));
  r = get("/api/v1/jobs?series=false&status=succeeded&user=alice&task=grid");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("total"), 2);  // j0, j2
  EXPECT_EQ(r.j.at("jobs")[0].at("task"), "grid");
  const auto& mon = r.j.at("jobs")[0].at("metrics").at("gpu_monitoring");
  EXPECT_FALSE(mon.contains("series"));
  EXPECT_EQ(mon.at("has_series"), true);
  EXPECT_EQ(get("/api/v1/jobs?uid=1001").j.at("total"), 2);

  // Bad parameters: 400 with a message naming the parameter.
  for (const char* q : {"limit=1001", "limit=x", "offset=-1", "status=bogus", "series=maybe", "uid=-3"}) {
    r = get(std::string("/api/v1/jobs?") + q);
    EXPECT_EQ(r.status, 400u) << q << r;
    const std::string key = std::string(q).substr(0, std::string(q).find('='));
    EXPECT_NE(r.message().find(key), std::string::npos) << q << r;
  }
  EXPECT_EQ(get("/api/v1/jobs?user=" + std::string(65, 'u')).status, 400u);
  EXPECT_EQ(get("/api/v1/jobs?task=a%01b").status, 400u);

  r = get("/api/v1/tasks");
  ASSERT_EQ(r.status, 200u) << r;
  // One row per task and owner: alice's two runs of "grid" and bob's one (j0, j2; j1).
  EXPECT_EQ(r.j.at("total"), 2);
  ASSERT_EQ(r.j.at("tasks").size(), 2u);
  const auto& t = r.j.at("tasks")[0].at("user") == "alice" ? r.j.at("tasks")[0] : r.j.at("tasks")[1];
  EXPECT_EQ(t.at("task"), "grid");
  EXPECT_EQ(t.at("user"), "alice");
  EXPECT_EQ(t.at("uid"), 1000);
  EXPECT_EQ(t.at("runs"), 2);
  EXPECT_EQ(t.at("succeeded"), 2);
  EXPECT_EQ(t.at("failed"), 0);
  EXPECT_DOUBLE_EQ(t.at("gpu_hours").get<double>(), 2.0);
  EXPECT_EQ(get("/api/v1/tasks?user=bob").j.at("tasks")[0].at("runs"), 1);
  EXPECT_EQ(get("/api/v1/tasks?limit=0").status, 400u);
  // One task's rows: the heading the dashboard puts over that task's runs.
  r = get("/api/v1/tasks?task=grid&user=alice");
  ASSERT_EQ(r.status, 200u) << r;
  ASSERT_EQ(r.j.at("tasks").size(), 1u) << r;
  EXPECT_EQ(r.j["tasks"][0].at("runs"), 2);
  EXPECT_EQ(get("/api/v1/tasks?task=other").j.at("total"), 0);
  EXPECT_EQ(get("/api/v1/tasks?task=a%01b").status, 400u);
}

TEST_F(ApiTest, Estimate) {
  // A read: no token needed.
  auto r =
      post("/api/v1/estimate", R"({"model":{"id_or_path":"llama-3-70b"},"parameters":{"tp-size":[1,2,4]}})", false);
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("gpus"), 4);
  EXPECT_GT(r.j.at("memory_mb_per_gpu").get<std::uint64_t>(), 0u);
  EXPECT_EQ(r.j.at("engine"), "default");
  EXPECT_TRUE(r.j.at("explanation").is_string());
  EXPECT_TRUE(r.j.contains("memory_fraction"));

  r = post("/api/v1/estimate?engine=vllm", R"({"parameters":{"tp-size":2}})", false);
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("engine"), "vllm");

  r = post("/api/v1/estimate", R"({"parameters":5})", false);
  EXPECT_EQ(r.status, 400u) << r;
  EXPECT_NE(r.message().find("parameters"), std::string::npos);
  EXPECT_EQ(post("/api/v1/estimate?engine=bogus", "{}", false).status, 400u);
  EXPECT_EQ(post("/api/v1/estimate", "nope", false).status, 400u);
  EXPECT_EQ(post("/api/v1/estimate", "{}", false, "text/csv").status, 415u);
}

}  // namespace
}  // namespace gf::server
