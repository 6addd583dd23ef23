// The agent's config file to settings (config/serve_config.hpp): the keys it takes, what it keeps as said
// for the server's own options, and the errors that name the file and the key.
#include "config/serve_config.hpp"

#include <gtest/gtest.h>

namespace gf::config {
namespace {

using namespace std::chrono_literals;

TEST(ServeSettings, KeysOverTheBaseAndServerOptionsAsSaid) {
  ServeSettings base;
  base.node_name = "from-base";
  base.db = "/var/lib/gpufleet/node.db";
  auto s = serve_settings_from_json(R"({"listen": "[::1]:9500", "interval_s": 0.5, "node_name": "gpu-7",
      "max_gpus_per_user": 4, "jobs": {"submit": true, "max_in_flight": 3}, "job_retention": "30d",
      "history": {"raw_retention": "2h"}, "reclaim": {"enabled": true, "idle_for": 600},
      "websocket": {"max_clients": 10, "queue": 8, "stall_timeout_s": 2, "socketio_sessions_per_address": 500},
      "allowed_hosts": ["gpu-7.lab"], "limits": {"max_body_bytes": 2048, "request_timeout_s": 1.5}})",
                                    "/etc/gpufleet.json", base);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->node_name, "gpu-7");
  EXPECT_EQ(s->db, "/var/lib/gpufleet/node.db");  // not in the file: the base's
  EXPECT_EQ(s->interval, 500ms);
  EXPECT_EQ(s->max_gpus_per_user, 4u);
  EXPECT_TRUE(s->jobs_submit);
  EXPECT_EQ(s->jobs_max_in_flight, 3u);
  EXPECT_EQ(s->job_retention, std::chrono::days(30));
  EXPECT_EQ(s->history_retention.raw, 2h);
  EXPECT_FALSE(s->history_retention.minute);
  EXPECT_TRUE(s->reclaim.enabled);
  EXPECT_EQ(s->reclaim.idle_for, 600s);
  EXPECT_EQ(s->http.host, "::1");
  EXPECT_EQ(s->http.port, 9500);
  EXPECT_EQ(s->websocket.max_clients, 10u);
  EXPECT_EQ(s->websocket.sio_sessions_per_address, 500u);
  EXPECT_EQ(s->http.ws_queue, 8u);
  EXPECT_EQ(s->http.ws_stall_timeout, 2000ms);
  EXPECT_EQ(s->http.allowed_hosts, std::vector<std::string>{"gpu-7.lab"});
  EXPECT_EQ(s->http.body_limit, 2048u);
  EXPECT_EQ(s->http.request_timeout, 1500ms);
  EXPECT_FALSE(s->http.header_limit);  // not said: the server's default stays
}

TEST(ServeSettings, ErrorsNameTheFileAndTheKey) {
  auto error_of = [](const std::string& text) {
    auto s = serve_settings_from_json(text, "f.json");
    return s ? std::string("parsed") : s.error().message;
  };
  EXPECT_EQ(error_of("[1]"), "f.json: expected a JSON object");
  EXPECT_EQ(error_of("{"), "f.json: not valid JSON");
  EXPECT_EQ(error_of(R"({"max_gpus_per_user": 2000})"),
            "f.json: 'max_gpus_per_user' must be an integer from 0 (no quota) to 1024");
  EXPECT_EQ(error_of(R"({"jobs": {"submit": 1}})"), "f.json: jobs.submit must be true or false");
  EXPECT_EQ(error_of(R"({"limits": {"request_timeout_s": 0}})"),
            "f.json: limits.request_timeout_s must be a number from 1 to 3600");
  EXPECT_EQ(error_of(R"({"websocket": {"socketio_sessions_per_address": 0}})"),
            "f.json: websocket.socketio_sessions_per_address must be a number from 1 to 100000");
  EXPECT_EQ(error_of(R"({"websocket": {"socketio_sessions_per_address": "many"}})"),
            "f.json: websocket.socketio_sessions_per_address must be a number from 1 to 100000");
  EXPECT_EQ(error_of(R"({"limits": {"max_header_bytes": 10}})"),
            "f.json: limits.max_header_bytes must be a number from 1024 to 1048576");
  EXPECT_EQ(error_of(R"({"job_retention": "36501d"})"), "f.json: job_retention: at most 36500d (0: kept for ever)");
  EXPECT_EQ(error_of(R"({"interval_s": 0.01})"),
            "f.json: interval_s: the interval must be from 0.05 to 3600 seconds (got 0.01)");
  EXPECT_NE(error_of(R"({"listen": "9401"})").find("expected HOST:PORT"), std::string::npos);
  EXPECT_NE(error_of(R"({"bogus": 1})").find("f.json: unknown key 'bogus' (expected one of "), std::string::npos);
  EXPECT_EQ(error_of(R"({"job_retention": 0})"), "parsed");  // 0: kept for ever
}

TEST(ServeSettings, ListenForms) {
  EXPECT_EQ(parse_listen(":9401")->first, "127.0.0.1");
  EXPECT_EQ(parse_listen("localhost:80")->first, "127.0.0.1");
  EXPECT_EQ(parse_listen("0.0.0.0:65535")->second, 65535);
  for (const char* bad : {"", "9401", "host:", "host:65536", "host:-1", "[::1]9401", "a:b:c", "host:123456"})
    EXPECT_FALSE(parse_listen(bad)) << bad;
}

}  // namespace
}  // namespace gf::config
