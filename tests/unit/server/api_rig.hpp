#pragma once
// The REST API tests' fixture (api_*_test.cpp): the handlers through the Router, without sockets —
// decide() + invoke() on built Requests — over an Agent, the node's Arbiter on a fake clock and the
// records view, in a per-test temp dir, as `gpufleet serve` wires them.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "node/arbiter.hpp"
#include "node/node_records.hpp"
#include "rig.hpp"
#include "server/api.hpp"
#include "server/api_cluster.hpp"
#include "store/node_store.hpp"
#include "support/fake_clock.hpp"

namespace gf::server::api_test {

using nlohmann::json;

inline core::GpuReading gpu(unsigned index, unsigned util, std::uint64_t used, int temp, double power) {
  auto g = test::make_gpu(index, util, used);
  g.temperature_c = temp;
  g.power_draw_w = power;
  return g;
}

struct Reply {
  unsigned status = 0;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool gzip = false;        // the body is gzip-encoded (Content-Encoding: gzip)
  bool negotiated = false;  // the encoding followed the request's Accept-Encoding
  json j;                   // the body parsed (discarded when it is not JSON)
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
  std::string message() const {
    return j.is_object() && j.contains("message") ? j["message"].get<std::string>() : std::string();
  }
};

inline std::ostream& operator<<(std::ostream& os, const Reply& r) { return os << r.status << " " << r.body; }

class ApiTest : public ::testing::Test {
 protected:
  testing::TempDir dir;
  testing::AgentRig rig;
  test::FakeClock clock;                       // the arbiter's
  std::unique_ptr<node::Arbiter> arbiter;      // the node's one writer, as `gpufleet serve` makes it
  std::unique_ptr<node::NodeRecords> records;  // the routes' read-only view
  ApiContext ctx;
  Router router;
  const std::string token = "test-token";

  std::string db() const { return (dir.path() / "gpufleet.db").string(); }

  void SetUp() override {
    rig.set_gpus({gpu(0, 10, 1000, 40, 100), gpu(1, 80, 2000, 60, 200), gpu(2, 5, 79000, 50, 50.5)});
    // As `gpufleet serve` does: the node store and the history share one file; the arbiter writes
    // through one connection, the records view reads through another.
    auto writer = store::NodeStore::open(db());
    ASSERT_TRUE(writer) << writer.error().message;
    auto reader = store::NodeStore::open(db());
    ASSERT_TRUE(reader) << reader.error().message;
    records = std::make_unique<node::NodeRecords>(std::move(*reader));
    node::AgentOptions ao;
    ao.interval = std::chrono::hours(1);  // requests read what start() published; no loop ticks in the way
    ao.node_name = "node-x";
    ao.fresh_reuse = std::chrono::milliseconds(0);  // every ?fresh=1 here must reach the driver
    rig.make_agent(ao, db());
    ASSERT_TRUE(rig.agent && rig.agent->has_history());
    rig.agent->start();
    // The arbiter decides on the agent's published reading, always recent on its fake clock.
    node::ReadingSource rs;
    rs.latest = [this]() -> std::pair<core::SnapshotPtr, std::chrono::steady_clock::time_point> {
      auto p = rig.agent->latest();
      if (!p) return {nullptr, {}};
      return {p->snapshot, clock.now()};
    };
    arbiter = std::make_unique<node::Arbiter>(std::move(*writer), std::move(rs), node::ArbiterOptions{}, clock);
    ctx.agent = rig.agent.get();
    ctx.monitor = rig.monitor.get();
    ctx.arbiter = arbiter.get();
    ctx.records = records.get();
    ctx.version = "9.9.9-test";
    ctx.node_name = "node-x";
    ctx.started = std::chrono::steady_clock::now();
    ctx.interval = ao.interval;
    add_monitoring_routes(router, ctx);
    add_job_routes(router, ctx);
    add_usage_routes(router, ctx);
    add_meta_routes(router, ctx);
    add_cluster_routes(router, nullptr);
  }
  void TearDown() override {
    rig.agent->stop();
    arbiter.reset();
    records.reset();
  }
  // Seeds a job record as a previous run left it (owner and all), through a connection of its own.
  void put_job(const core::Job& job) {
    auto st = store::NodeStore::open(db());
    ASSERT_TRUE(st) << st.error().message;
    ASSERT_TRUE((*st)->put_job(job));
  }

  Reply call(Method m, const std::string& target, const std::string& body = {}, bool auth = true,
             const std::string& content_type = "application/json") {
    Request req;
    req.method = m;
    req.target = target;
    const auto q = target.find('?');
    EXPECT_TRUE(url_decode(std::string_view(target).substr(0, q), req.path, false));
    if (q != std::string::npos) {
      EXPECT_TRUE(parse_query(std::string_view(target).substr(q + 1), req.query));
    }
    req.body = body;
    req.content_type = body.empty() ? std::string() : content_type;
    if (auth) req.authorization = "Bearer " + token;
    req.accepts_gzip = accept_gzip;
    const auto d = decide(router, req, token, false);
    const Response r = d.answer ? *d.answer : invoke(*d.route, req);
    Reply out;
    out.status = r.status;
    out.content_type = r.content_type;
    out.body = body_text(r);
    out.headers = r.headers;
    out.gzip = r.gzip;
    out.negotiated = r.negotiated;
    out.j = json::parse(out.body, nullptr, false);
    return out;
  }
  Reply get(const std::string& target) { return call(Method::Get, target); }
  bool accept_gzip = false;  // the requests' Accept-Encoding allows gzip
  Reply post(const std::string& target, const std::string& body, bool auth = true,
             const std::string& content_type = "application/json") {
    return call(Method::Post, target, body, auth, content_type);
  }
};

}  // namespace gf::server::api_test
