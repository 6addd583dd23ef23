// The routes kept for the seeds' clients (issue 13): the fleet manager's /api/v1/monitoring/health and
// /metrics, the home monitor's /api/gpu/processes and /api/health keys, and every seed route's error
// shape when there is no good reading — a failed fresh query, or one older than two collection
// intervals on the routes' clock (moved by hand) — while gpufleet's own routes mark such a reading
// stale. Also a node with no GPUs, which is not an error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <utility>
#include <vector>

#include "rig.hpp"
#include "server/api.hpp"
#include "store/node_store.hpp"

namespace gf::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

// The real clocks moved forward by a shift the test sets: the agent stamps readings with real steady
// time, and the routes judge their age by this.
class ShiftedClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::now() + std::chrono::nanoseconds(shift_.load());
  }
  std::chrono::system_clock::time_point wall_now() const override {
    return std::chrono::system_clock::now() +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(shift_.load()));
  }
  void advance(std::chrono::nanoseconds d) { shift_.fetch_add(d.count()); }
  void reset() { shift_.store(0); }

 private:
  std::atomic<long long> shift_{0};
};

struct Reply {
  unsigned status = 0;
  json j;
};
std::ostream& operator<<(std::ostream& os, const Reply& r) { return os << r.status << " " << r.j.dump(); }

core::GpuProcess gpu_proc(std::uint32_t pid, std::string user, std::string command, std::uint64_t mib,
                          core::ProcessKind kind = core::ProcessKind::Compute) {
  core::GpuProcess p;
  p.pid = pid;  // beyond any real pid_max: the monitor finds nothing in /proc and keeps this text
  p.user = std::move(user);
  p.name = command.substr(0, command.find(' '));
  p.command = std::move(command);
  p.used_memory_mib = mib;
  p.kind = kind;
  return p;
}

class SeedRoutes : public ::testing::Test {
 protected:
  testing::TempDir dir;
  testing::AgentRig rig;
  std::unique_ptr<node::NodeRecords> records;
  ShiftedClock clock;
  ApiContext ctx;
  Router router;

  fs::path proc() const { return dir.path() / "proc"; }
  void write_proc(const std::string& name, const std::string& text) { std::ofstream(proc() / name) << text; }

  void SetUp() override {
    auto g0 = test::make_gpu(0, 10, 1000);
    g0.temperature_c = 40;
    g0.fan_pct = 30;
    g0.power_draw_w = 60.0;
    g0.persistence_mode = true;
    rig.set_gpus({g0, test::make_gpu(1, 80, 2000), test::make_gpu(2, 5, 79000)});
    fs::create_directories(proc());
    write_proc("stat", "cpu  100 0 0 900 0 0 0 0 0 0\ncpu0 100 0 0 900\ncpu1 0 0 0 0\n");
    write_proc("meminfo", "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 250 kB\n");
    auto st = store::NodeStore::open((dir.path() / "gpufleet.db").string());
    ASSERT_TRUE(st) << st.error().message;
    records = std::make_unique<node::NodeRecords>(std::move(*st));
    node::AgentOptions ao;
    ao.interval = 1h;  // no loop tick in the way: the tests run collections by hand
    ao.node_name = "node-x";
    ao.fresh_reuse = 0ms;
    rig.make_agent(ao);
    rig.agent->start();
    ctx.agent = rig.agent.get();
    ctx.monitor = rig.monitor.get();
    ctx.records = records.get();
    ctx.version = "9.9.9-test";
    ctx.node_name = "node-x";
    ctx.started = std::chrono::steady_clock::now();
    ctx.interval = ao.interval;
    ctx.clock = &clock;
    ctx.proc_root = proc().string();
    ctx.disk_path = dir.path().string();
    add_monitoring_routes(router, ctx);
  }
  void TearDown() override { rig.agent->stop(); }

  Reply get(const std::string& target) {
    Request req;
    req.method = Method::Get;
    req.target = target;
    const auto q = target.find('?');
    EXPECT_TRUE(url_decode(std::string_view(target).substr(0, q), req.path, false));
    if (q != std::string::npos) {
      EXPECT_TRUE(parse_query(std::string_view(target).substr(q + 1), req.query));
    }
    const auto d = decide(router, req, "t", false);
    const Response r = d.answer ? *d.answer : invoke(*d.route, req);
    return {r.status, json::parse(r.body ? *r.body : std::string(), nullptr, false)};
  }

  // A collection that fails, run by the hub as the loop would at its next due time.
  void fail_collection() {
    rig.st->fail = true;
    ASSERT_EQ(rig.hub->step(std::chrono::steady_clock::now() + 2h), 1u);
    ASSERT_EQ(rig.agent->counters().last_error, "scripted failure");
  }
};

const json kSummaryError = {
    {"error", "Failed to get GPU information"}, {"gpu_count", 0}, {"monitoring_available", false}};
const json kMetricsError = {{"error", "Failed to get GPU metrics"}, {"gpus", json::array()}};

TEST_F(SeedRoutes, MonitoringHealthInTheFleetManagersShape) {
  const auto r = get("/api/v1/monitoring/health");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.size(), 3u) << r;
  EXPECT_EQ(r.j.at("status"), "healthy");
  EXPECT_EQ(r.j.at("version"), "9.9.9-test");
  // The seed's format: microseconds, no zone suffix.
  EXPECT_TRUE(
      std::regex_match(r.j.at("timestamp").get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6})")))
      << r;
}

// Every key the OpenAPI schema `name` requires, at each level the schema describes, is in `doc` (the
// seeds' clients read those keys by name).
void expect_seed_schema_keys(const std::string& name, const json& doc) {
  const auto schemas = json::parse(openapi_document()).at("components").at("schemas");
  ASSERT_TRUE(schemas.contains(name)) << name;
  std::vector<std::pair<json, json>> todo = {{schemas.at(name), doc}};
  std::size_t checked = 0;
  while (!todo.empty()) {
    auto [schema, part] = todo.back();
    todo.pop_back();
    for (const auto& k : schema.value("required", json::array())) {
      EXPECT_TRUE(part.contains(k.get<std::string>())) << name << ": " << k << " missing in " << part;
      ++checked;
    }
    const json properties = schema.value("properties", json::object());  // kept: items() refers to it
    for (const auto& [k, sub] : properties.items())
      if (part.contains(k) && part.at(k).is_object()) todo.emplace_back(sub, part.at(k));
  }
  EXPECT_GT(checked, 0u) << name;
}

TEST_F(SeedRoutes, MonitoringMetricsReadTheHostWithoutSleeping) {
  // The baseline was read when the routes were added; two seconds on, 100 more busy ticks of 200.
  write_proc("stat", "cpu  200 0 0 1000 0 0 0 0 0 0\ncpu0 100 0 0 900\ncpu1 0 0 0 0\n");
  clock.advance(2s);
  const auto r = get("/api/v1/monitoring/metrics");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("system").at("cpu_percent"), 50.0) << r;
  EXPECT_EQ(r.j.at("system").at("cpu_count"), 2);
  EXPECT_GE(r.j.at("system").at("cpu_interval_s").get<double>(), 2.0);
  // The seed's shape: memory and disk inside "system", nothing of them beside it.
  EXPECT_FALSE(r.j.contains("memory")) << r;
  EXPECT_FALSE(r.j.contains("disk")) << r;
  const auto& m = r.j.at("system").at("memory");
  EXPECT_EQ(m.at("total"), 1000 * 1024);
  EXPECT_EQ(m.at("available"), 250 * 1024);
  EXPECT_EQ(m.at("free"), 100 * 1024);
  EXPECT_EQ(m.at("used"), 750 * 1024);
  EXPECT_EQ(m.at("percent"), 75.0);
  const auto& d = r.j.at("system").at("disk");
  EXPECT_EQ(d.at("path"), dir.path().string());
  EXPECT_GT(d.at("total").get<std::uint64_t>(), 0u);
  EXPECT_LE(d.at("used").get<std::uint64_t>(), d.at("total").get<std::uint64_t>());
  EXPECT_TRUE(d.at("error").is_null());
  expect_seed_schema_keys("HostMetrics", r.j);
}

TEST_F(SeedRoutes, MonitoringMetricsWithNothingReadableIsTheSeedsDetailError) {
  fs::remove(proc() / "stat");
  fs::remove(proc() / "meminfo");
  const auto r = get("/api/v1/monitoring/metrics");
  EXPECT_EQ(r.status, 500u) << r;
  ASSERT_EQ(r.j.size(), 1u) << r;
  EXPECT_EQ(r.j.at("detail").get<std::string>().rfind("Failed to get system metrics: cannot read ", 0), 0u) << r;
}

TEST_F(SeedRoutes, AFreshReadingIsServedInTheSeedsShapes) {
  auto r = get("/api/gpu/summary");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("gpu_count"), 3);
  EXPECT_EQ(r.j.at("monitoring_available"), true);
  EXPECT_FALSE(r.j.contains("message"));
  EXPECT_EQ(get("/api/gpu/metrics").j.at("gpus").size(), 3u);
  EXPECT_EQ(get("/api/v1/monitoring/gpu-metrics").j.at("gpus").size(), 3u);
  r = get("/api/health");
  ASSERT_EQ(r.status, 200u) << r;
  // The seed's frontend compares a string: health.gpu_monitoring === "available".
  EXPECT_EQ(r.j.at("gpu_monitoring"), "available") << r;
  EXPECT_EQ(r.j.at("service"), "gpufleet");
  EXPECT_EQ(r.j.at("database"), "connected");
  EXPECT_TRUE(r.j.at("version").is_string());
  const auto& gm = r.j.at("monitoring");  // gpufleet's detail
  EXPECT_EQ(gm.at("available"), true);
  EXPECT_EQ(gm.at("gpu_count"), 3);
  EXPECT_TRUE(gm.at("last_error").is_null());
  EXPECT_EQ(gm.at("stale"), false);
  EXPECT_EQ(gm.at("backend"), "scripted");
  expect_seed_schema_keys("Health", r.j);
  EXPECT_EQ(r.j.at("status"), "ok");  // the existing keys are still there
  EXPECT_TRUE(r.j.at("backend").is_object());
}

// A dead driver: within two intervals the last good reading is still served; past them every seed
// route answers with its error shape, and gpufleet's own routes mark the reading stale with its age.
TEST_F(SeedRoutes, AStaleReadingIsAnErrorOnSeedRoutesAndMarkedOnOwnRoutes) {
  fail_collection();
  clock.advance(90min);  // 1.5 intervals: not stale yet
  EXPECT_EQ(get("/api/gpu/summary").status, 200u);
  auto own = get("/api/v1/gpus");
  ASSERT_EQ(own.status, 200u) << own;
  EXPECT_EQ(own.j.at("stale"), false);
  EXPECT_GE(own.j.at("age_s").get<double>(), 5400.0);

  clock.advance(60min);  // 2.5 intervals
  auto r = get("/api/v1/monitoring/gpu-metrics");
  EXPECT_EQ(r.status, 500u) << r;
  ASSERT_EQ(r.j.size(), 1u) << r;
  const auto detail = r.j.at("detail").get<std::string>();
  EXPECT_EQ(detail.rfind("Failed to get GPU metrics: the last reading is ", 0), 0u) << detail;
  EXPECT_NE(detail.find("the last collection failed: scripted failure"), std::string::npos) << detail;

  r = get("/api/gpu/summary");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_EQ(r.j, kSummaryError);
  r = get("/api/gpu/metrics");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_EQ(r.j, kMetricsError);
  r = get("/api/gpu/processes");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_EQ(r.j, (json{{"error", "Failed to get GPU processes"}, {"processes", json::array()}}));

  r = get("/api/health");
  EXPECT_EQ(r.status, 503u) << r;  // its own rule: the last collection failed
  EXPECT_EQ(r.j.at("gpu_monitoring"), "unavailable") << r;
  const auto& gm = r.j.at("monitoring");
  EXPECT_EQ(gm.at("available"), false);
  EXPECT_EQ(gm.at("gpu_count"), 0);
  EXPECT_EQ(gm.at("stale"), true);
  EXPECT_NE(gm.at("last_error").get<std::string>().find("scripted failure"), std::string::npos) << gm;

  for (const char* path : {"/api/v1/gpus", "/api/v1/gpus/1", "/api/v1/processes", "/api/v1/availability"}) {
    r = get(path);
    ASSERT_EQ(r.status, 200u) << path << ": " << r;
    EXPECT_EQ(r.j.at("stale"), true) << path;
    EXPECT_GE(r.j.at("age_s").get<double>(), 9000.0) << path;
  }

  // The driver answers again: a good collection (stamped by the hub's real clock, so the routes' clock
  // goes back to it) makes every route fresh.
  rig.st->fail = false;
  clock.reset();
  ASSERT_EQ(rig.hub->step(std::chrono::steady_clock::now() + 4h), 1u);
  EXPECT_EQ(get("/api/gpu/summary").status, 200u);
  EXPECT_EQ(get("/api/v1/monitoring/gpu-metrics").status, 200u);
  EXPECT_EQ(get("/api/v1/gpus/1").j.at("stale"), false);
  r = get("/api/health");
  EXPECT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("gpu_monitoring"), "available") << r;
  EXPECT_EQ(r.j.at("monitoring").at("available"), true);
}

// A loop that stopped publishing without an error (stuck) is stale all the same, and says so.
TEST_F(SeedRoutes, AStuckLoopIsStaleToo) {
  clock.advance(3h);
  const auto r = get("/api/v1/monitoring/gpu-metrics");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_NE(r.j.at("detail").get<std::string>().find("has not published"), std::string::npos) << r;
  EXPECT_EQ(get("/api/gpu/summary").j, kSummaryError);
}

TEST_F(SeedRoutes, AFailedFreshQueryIsTheSeedsErrorNotTheLastReading) {
  rig.st->fail = true;
  auto r = get("/api/v1/monitoring/gpu-metrics?fresh=1");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_EQ(r.j.at("detail"), "Failed to get GPU metrics: scripted failure");
  r = get("/api/gpu/summary?fresh=1");
  EXPECT_EQ(r.status, 500u) << r;
  EXPECT_EQ(r.j, kSummaryError);
  EXPECT_EQ(get("/api/gpu/metrics?fresh=1").j, kMetricsError);
  // gpufleet's own routes keep their error document.
  r = get("/api/v1/gpus?fresh=1");
  EXPECT_EQ(r.status, 503u) << r;
  EXPECT_EQ(r.j.at("error"), "unavailable");
}

TEST_F(SeedRoutes, ANodeWithNoGpusIsNotAnError) {
  rig.set_gpus({});
  auto r = get("/api/v1/monitoring/gpu-metrics?fresh=1");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("gpus").empty());
  EXPECT_EQ(r.j.at("message"), "The scripted backend works but sees no GPUs on this node");
  r = get("/api/gpu/summary");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("gpu_count"), 0);
  EXPECT_EQ(r.j.at("monitoring_available"), true);
  EXPECT_EQ(r.j.at("message"), "The scripted backend works but sees no GPUs on this node");
  r = get("/api/gpu/metrics");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.j.at("gpus").empty());
  EXPECT_TRUE(r.j.contains("message"));
  r = get("/api/gpu/processes");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.j.at("explanation"), "The scripted backend works but sees no GPUs on this node.");
  EXPECT_EQ(r.j.at("gpu_count"), 0);
  r = get("/api/health");
  EXPECT_EQ(r.j.at("gpu_monitoring"), "available") << r;
  EXPECT_EQ(r.j.at("monitoring").at("available"), true);
  EXPECT_EQ(r.j.at("monitoring").at("gpu_count"), 0);
}

TEST_F(SeedRoutes, ProcessesNameWhoKeepsTheFanRunningCappedAndEscaped) {
  auto g0 = test::make_gpu(0, 90, 30000);
  g0.processes = {gpu_proc(4194301, "alice", "python train.py --epochs 3", 12000),
                  gpu_proc(4194302, "mallory", "evil\x1b[2J" + std::string(5000, 'x'), 9000),
                  gpu_proc(4194303, "carol", "Xorg :0", 100, core::ProcessKind::Graphics)};
  auto g1 = test::make_gpu(1, 50, 9000);
  g1.processes = {gpu_proc(4194304, "dave", "python serve.py", 8000), gpu_proc(4194305, "erin", "jupyter", 50)};
  rig.set_gpus({g0, g1});
  const auto r = get("/api/gpu/processes?fresh=1");
  ASSERT_EQ(r.status, 200u) << r;
  const auto text = r.j.at("explanation").get<std::string>();
  EXPECT_EQ(
      text.rfind("5 processes use the GPUs: python train.py --epochs 3 (user alice, GPU 0, 12000 MiB); evil\\x1b[2Jxxx",
                 0),
      0u)
      << text;
  EXPECT_NE(text.find("(user mallory, GPU 0, 9000 MiB); python serve.py (user dave, GPU 1, 8000 MiB); and 2 more."),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_LT(text.size(), 400u);
  EXPECT_EQ(r.j.at("process_count"), 5);
  EXPECT_EQ(r.j.at("counts"), (json{{"compute", 4}, {"graphics", 1}, {"compute+graphics", 0}, {"mps", 0}}));
  ASSERT_EQ(r.j.at("processes").size(), 5u);
  const auto& evil = r.j["processes"][1];
  EXPECT_EQ(evil.at("user"), "mallory");
  const auto cmd = evil.at("command").get<std::string>();
  EXPECT_EQ(cmd.find('\x1b'), std::string::npos);
  EXPECT_LE(cmd.size(), 520u);  // capped at 512 bytes (before escaping) and marked
  EXPECT_EQ(r.j.at("gpus").size(), 2u);
  EXPECT_EQ(r.j.at("gpus")[0].at("process_count"), 3);
}

TEST_F(SeedRoutes, NoProcessesSaysWhatElseKeepsAFanRunning) {
  const auto r = get("/api/gpu/processes");
  ASSERT_EQ(r.status, 200u) << r;
  const auto text = r.j.at("explanation").get<std::string>();
  EXPECT_EQ(
      text.rfind("No process is using the GPUs; GPU 0 is at 40 °C, with its fan at 30 %, drawing 60.0 W, 10 % busy", 0),
      0u)
      << text;
  EXPECT_NE(text.find("GPU 1 is 80 % busy"), std::string::npos) << text;
  EXPECT_NE(text.find("a fan keeps turning to cool a warm GPU even when it is idle"), std::string::npos) << text;
  EXPECT_NE(text.find("persistence mode keeps the driver loaded on GPU 0."), std::string::npos) << text;
  EXPECT_EQ(r.j.at("process_count"), 0);
  EXPECT_TRUE(r.j.at("processes").empty());
  EXPECT_EQ(r.j.at("gpus")[0].at("fan_speed"), 30);
  EXPECT_EQ(r.j.at("gpus")[0].at("persistence_mode"), true);
  EXPECT_TRUE(r.j.at("gpus")[1].at("temperature").is_null());
}

TEST(SeedOpenApi, EverySeedRouteIsMarkedAndItsSchemasExist) {
  const auto doc = json::parse(openapi_document());
  const std::set<std::string> seed = {"/api/v1/monitoring/gpu-metrics",
                                      "/api/v1/monitoring/health",
                                      "/api/v1/monitoring/metrics",
                                      "/api/gpu/summary",
                                      "/api/gpu/metrics",
                                      "/api/gpu/processes",
                                      "/api/health"};
  std::set<std::string> tags;
  for (const auto& t : doc.at("tags")) tags.insert(t.at("name").get<std::string>());
  for (const auto& [path, ops] : doc.at("paths").items())
    for (const auto& [method, op] : ops.items()) {
      if (seed.count(path)) {
        EXPECT_EQ(op.value("x-gpufleet-dialect", ""), "seed") << path;
        ASSERT_EQ(op.at("tags").size(), 1u) << path;
        EXPECT_TRUE(tags.count(op["tags"][0].get<std::string>())) << path;
      } else {
        EXPECT_FALSE(op.contains("x-gpufleet-dialect")) << path;
      }
    }
  // Every schema a response names is defined.
  const auto text = doc.dump();
  const std::regex ref(R"re("#/components/schemas/(\w+)")re");
  unsigned refs = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), ref); it != std::sregex_iterator(); ++it, ++refs)
    EXPECT_TRUE(doc.at("components").at("schemas").contains((*it)[1].str())) << (*it)[1].str();
  EXPECT_GE(refs, 7u);
}

}  // namespace
}  // namespace gf::server
