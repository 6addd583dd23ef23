// DockerClient against the stand-in engine (tests/fakes/docker_standin.hpp): what reaches the engine,
// and what the caller sees back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "fakes/docker_standin.hpp"
#include "launch/docker.hpp"
#include "support/eventually.hpp"
#include "support/temp_dir.hpp"

namespace gf::launch {
namespace {

using fakes::DockerStandin;
using fakes::DockerStandinConfig;
using fakes::StandinFault;
using fakes::StandinFrame;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

DockerRunSpec gpu_spec() {
  DockerRunSpec spec;
  spec.image = "nvcr.io/nvidia/pytorch:24.01-py3";
  spec.cmd = {"python", "train.py", "--epochs", "3"};
  spec.gpu_ids = {"1", "GPU-6f1c2a3b-0000-1111-2222-333344445555"};
  spec.env = {"FOO=bar", "CUDA_VISIBLE_DEVICES=0,1", "NVIDIA_VISIBLE_DEVICES=all", "WANDB_MODE=offline"};
  spec.name = "gf-job-7";
  spec.labels = {{"gpufleet.job", "7"}, {"gpufleet.owner", "ana"}};
  return spec;
}

json create_body(const DockerStandin& engine) {
  const auto body = engine.last_create_body();
  if (!body) {
    ADD_FAILURE() << "the stand-in saw no POST /containers/create";
    return json::object();
  }
  return json::parse(*body);
}

TEST(DockerRun, HappyPathSendsTheDeviceRequestAndReturnsExitCodeAndLogs) {
  DockerStandinConfig cfg;
  cfg.exit_code = 3;
  cfg.run_time = std::chrono::milliseconds(120);
  cfg.logs = {{1, "epoch 1\n"}, {2, "warning: slow\n"}, {1, "epoch 2\n"}};
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());

  const auto result = client.run(gpu_spec());

  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_EQ(result->logs_tail, "epoch 1\nwarning: slow\nepoch 2\n");  // demultiplexed, in order
  EXPECT_EQ(result->container_id.size(), 64U);
  EXPECT_TRUE(result->warnings.empty());

  const auto body = create_body(engine);
  EXPECT_EQ(body["Image"], "nvcr.io/nvidia/pytorch:24.01-py3");
  EXPECT_EQ(body["Cmd"], json({"python", "train.py", "--epochs", "3"}));
  EXPECT_EQ(body["Labels"], json({{"gpufleet.job", "7"}, {"gpufleet.owner", "ana"}}));
  EXPECT_EQ(body["Tty"], false);
  const auto& requests = body["HostConfig"]["DeviceRequests"];
  ASSERT_EQ(requests.size(), 1U) << body.dump();
  EXPECT_EQ(requests[0]["DeviceIDs"], json({"1", "GPU-6f1c2a3b-0000-1111-2222-333344445555"}));
  EXPECT_EQ(requests[0]["Capabilities"], json::parse(R"([["gpu"]])"));
  EXPECT_EQ(requests[0]["Count"], 0);
  EXPECT_EQ(requests[0]["Driver"], "");
  // The seed's rule: no CUDA_VISIBLE_DEVICES next to device_requests, even when the caller passed one.
  EXPECT_EQ(body["Env"], json({"FOO=bar", "WANDB_MODE=offline"}));

  EXPECT_EQ(engine.count("POST", "/start"), 1U);
  EXPECT_EQ(engine.count("POST", "/wait"), 1U);
  EXPECT_EQ(engine.count("GET", "/logs"), 1U);
  EXPECT_EQ(engine.count("DELETE", "/" + result->container_id), 1U);
  EXPECT_TRUE(engine.live_containers().empty());
}

TEST(DockerRun, RequestsGoInOrderToTheNegotiatedVersionAndNameTheContainer) {
  DockerStandin engine;
  DockerClient client(engine.socket_path());
  auto spec = gpu_spec();
  spec.name = "job 7/a";  // must reach the engine escaped
  const auto result = client.run(spec);
  ASSERT_TRUE(result) << result.error().message;

  std::vector<std::string> seen;
  for (const auto& r : engine.requests()) {
    auto path = r.path;
    if (const auto at = path.find(result->container_id); at != std::string::npos) {
      path.replace(at, result->container_id.size(), "{id}");
    }
    seen.push_back(r.method + " " + path);
    if (r.path != "/_ping") {
      EXPECT_EQ(r.api_version, "1.41") << r.target;
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"GET /_ping", "POST /containers/create", "POST /containers/{id}/start",
                                            "POST /containers/{id}/wait", "GET /containers/{id}/logs",
                                            "DELETE /containers/{id}"}));
  ASSERT_GE(engine.requests().size(), 2U);
  EXPECT_THAT(engine.requests()[1].target, HasSubstr("?name=job%207%2Fa"));
}

TEST(DockerRun, MissingImageIsOneClearLineAndLeavesNoContainer) {
  DockerStandinConfig cfg;
  cfg.missing_images = {"foo"};
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  DockerRunSpec spec;
  spec.image = "foo";
  spec.gpu_ids = {"0"};

  const auto result = client.run(spec);

  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, StartsWith("docker: 404 No such image: foo:latest"));
  EXPECT_THAT(result.error().message, HasSubstr("docker pull foo:latest"));
  EXPECT_EQ(result.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(engine.count("POST", "/start"), 0U);
  EXPECT_TRUE(engine.live_containers().empty());
}

TEST(DockerRun, StartFailureRemovesTheCreatedContainerAndHints) {
  DockerStandinConfig cfg;
  cfg.faults = {StandinFault{"POST", "/start", 500, "could not select device driver \"\" with capabilities: [[gpu]]"}};
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  auto spec = gpu_spec();
  spec.remove = false;  // even so: a container that never started is not kept

  const auto result = client.run(spec);

  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, StartsWith("docker: 500 could not select device driver"));
  EXPECT_THAT(result.error().message, HasSubstr("NVIDIA Container Toolkit"));
  EXPECT_EQ(engine.count("POST", "/containers/create"), 1U);
  EXPECT_TRUE(engine.live_containers().empty()) << "the created container leaked";
}

TEST(DockerRun, CancelStopsThenRemovesTheContainerPromptly) {
  DockerStandinConfig cfg;
  cfg.run_time = std::chrono::seconds(20);  // an uncancellable wait would take this long and then succeed
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  std::atomic<bool> cancel{false};
  std::jthread canceller([&] {
    // Cancel once the engine has the client's /wait (the client is then blocked reading its answer), so the
    // cancel really interrupts a pending request.
    test::eventually([&] { return engine.count("POST", "/wait") > 0; });
    cancel = true;
  });

  const auto t0 = std::chrono::steady_clock::now();
  const auto result = client.run(gpu_spec(), &cancel);
  const auto elapsed = std::chrono::steady_clock::now() - t0;

  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("cancelled"));
  EXPECT_THAT(result.error().message, HasSubstr("stopped and removed"));
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_EQ(engine.count("POST", "/wait"), 1U);
  std::vector<std::string> tail;
  for (const auto& r : engine.requests()) {
    if (r.method == "POST" && r.path.ends_with("/stop")) tail.push_back("stop");
    if (r.method == "DELETE") tail.push_back("delete");
  }
  EXPECT_EQ(tail, (std::vector<std::string>{"stop", "delete"}));
  EXPECT_TRUE(engine.live_containers().empty());
}

TEST(DockerRun, CancelWithRemoveOffStopsAndKeepsTheContainer) {
  DockerStandinConfig cfg;
  cfg.run_time = std::chrono::seconds(20);
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  auto spec = gpu_spec();
  spec.remove = false;
  std::atomic<bool> cancel{false};
  std::jthread canceller([&] {
    // While the container runs: once the engine has the client's /wait.
    test::eventually([&] { return engine.count("POST", "/wait") > 0; });
    cancel = true;
  });

  const auto result = client.run(spec, &cancel);

  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message, HasSubstr("stopped (kept"));
  EXPECT_EQ(engine.count("POST", "/stop"), 1U);
  EXPECT_EQ(engine.live_containers().size(), 1U);
}

TEST(DockerRun, RemoveOffKeepsTheExitedContainer) {
  DockerStandin engine;
  DockerClient client(engine.socket_path());
  auto spec = gpu_spec();
  spec.remove = false;
  const auto result = client.run(spec);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(engine.live_containers(), std::vector<std::string>{result->container_id});
  EXPECT_EQ(engine.requests().back().method, "GET");  // the logs were the last thing asked for
}

TEST(DockerRun, LogsTailIsTheLast64KiB) {
  DockerStandinConfig cfg;
  std::string big;
  for (int i = 0; big.size() < 200 * 1024; ++i) big += "line " + std::to_string(i) + "\n";
  cfg.logs = {{1, big.substr(0, 100000)}, {2, big.substr(100000)}};
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  const auto result = client.run(gpu_spec());
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->logs_tail.size(), kDefaultLogsTailBytes);
  EXPECT_EQ(result->logs_tail, big.substr(big.size() - kDefaultLogsTailBytes));
}

TEST(DockerClientLogs, NewerEnginesLabelTheFramingAndTtyLogsPassRaw) {
  DockerStandinConfig framed;
  framed.api_version = "1.44";
  framed.label_multiplexed = true;
  framed.logs = {{1, "a"}, {2, "b"}};
  DockerStandinConfig tty = framed;
  tty.tty = true;
  tty.logs = {{1, std::string("\x01\x00\x00\x00", 4) + "raw bytes that look like a header"}};

  const std::string tty_text = tty.logs[0].text;
  for (const auto& [cfg, expected] : {std::pair{framed, std::string("ab")}, std::pair{tty, tty_text}}) {
    DockerStandin engine(cfg);
    DockerClient client(engine.socket_path());
    ASSERT_TRUE(client.ping());
    const auto id = client.create(gpu_spec());
    ASSERT_TRUE(id) << id.error().message;
    const auto text = client.logs(*id, 1024);
    ASSERT_TRUE(text) << text.error().message;
    EXPECT_EQ(*text, expected);
  }
}

TEST(DockerClientPing, NegotiatesDownToTheEnginesVersion) {
  DockerStandinConfig cfg;
  cfg.api_version = "1.44";
  cfg.min_api_version = "1.44";  // Docker 29: v1.41 requests are refused
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());

  // Before ping the client speaks v1.41, and such an engine's refusal must come through readably.
  const auto early = client.create(gpu_spec());
  ASSERT_FALSE(early);
  EXPECT_THAT(early.error().message, StartsWith("docker: 400 client version 1.41 is too old"));

  const auto v = client.ping();
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, "1.44");
  EXPECT_EQ(client.api_version(), "1.44");
  ASSERT_TRUE(client.create(gpu_spec()));
  EXPECT_EQ(engine.requests().back().api_version, "1.44");
}

TEST(DockerClientPing, CapsAtTheNewestVersionWeKnow) {
  DockerStandinConfig cfg;
  cfg.api_version = "1.99";
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  const auto v = client.ping();
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, kNewestApiVersion);
}

TEST(DockerClientPing, RefusesAnEngineOlderThan141) {
  DockerStandinConfig cfg;
  cfg.api_version = "1.40";
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  const auto v = client.ping();
  ASSERT_FALSE(v);
  EXPECT_THAT(v.error().message, HasSubstr("speaks API 1.40; gpufleet needs 1.41 or newer"));
}

TEST(DockerClientWait, TimesOutWithAClearError) {
  DockerStandinConfig cfg;
  cfg.run_time = std::chrono::seconds(20);
  DockerStandin engine(cfg);
  DockerClient client(engine.socket_path());
  const auto id = client.create(gpu_spec());
  ASSERT_TRUE(id) << id.error().message;
  ASSERT_TRUE(client.start(*id));

  const auto t0 = std::chrono::steady_clock::now();
  const auto code = client.wait(*id, std::chrono::milliseconds(150));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  ASSERT_FALSE(code);
  EXPECT_THAT(code.error().message, HasSubstr("timed out after 150 ms waiting for container " + id->substr(0, 12)));

  // Idempotent edges are successes: start twice (304), stop twice (304).
  EXPECT_TRUE(client.start(*id));
  EXPECT_TRUE(client.stop(*id, 0));
  EXPECT_TRUE(client.stop(*id, 0));
  const auto stopped = client.wait(*id);
  ASSERT_TRUE(stopped) << stopped.error().message;
  EXPECT_EQ(*stopped, 137);
  EXPECT_TRUE(client.remove(*id, false));
  EXPECT_TRUE(engine.live_containers().empty());
}

TEST(DockerClientPing, ProxyVariablesDoNotApplyToTheSocket) {
  DockerStandin engine;
  DockerClient client(engine.socket_path());
  // Nothing listens on port 9: if curl routed through the proxy, ping would fail.
  ASSERT_EQ(setenv("http_proxy", "http://127.0.0.1:9", 1), 0);
  ASSERT_EQ(setenv("HTTP_PROXY", "http://127.0.0.1:9", 1), 0);
  const auto v = client.ping();
  unsetenv("http_proxy");
  unsetenv("HTTP_PROXY");
  EXPECT_TRUE(v) << v.error().message;
}

TEST(DockerClientErrors, UnknownContainerSurfacesTheEngineMessage) {
  DockerStandin engine;
  DockerClient client(engine.socket_path());
  const auto r = client.remove("deadbeef", true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "docker: 404 No such container: deadbeef");
}

TEST(DockerClientErrors, MissingSocketIsOneClearLine) {
  test::TempDir dir;
  const auto path = (dir.path() / "docker.sock").string();
  DockerClient client(path);

  const auto result = client.run(gpu_spec());

  ASSERT_FALSE(result);
  EXPECT_THAT(result.error().message,
              StartsWith("cannot reach the Docker engine at " + path + ": No such file or directory"));
  EXPECT_THAT(result.error().message, HasSubstr("DOCKER_HOST"));
  EXPECT_EQ(result.error().message.find('\n'), std::string::npos);
}

TEST(DockerClientErrors, SomethingThatIsNotASocketIsRefused) {
  test::TempDir dir;
  const auto path = (dir.path() / "docker.sock").string();
  std::ofstream(path) << "not a socket";
  DockerClient client(path);
  const auto v = client.ping();
  ASSERT_FALSE(v);
  EXPECT_THAT(v.error().message, StartsWith("cannot reach the Docker engine at " + path + ": Connection refused"));
}

TEST(DockerClientErrors, PermissionDeniedHintsAtTheDockerGroup) {
  if (geteuid() == 0) {
    // Root ignores socket permissions, and forking this multi-threaded process is unsafe: run this
    // very test again, in a fresh process, as the unprivileged user nobody.
    char self[4096] = {};
    ASSERT_GT(readlink("/proc/self/exe", self, sizeof self - 1), 0);
    const std::string cmd = std::string("runuser -u nobody -- '") + self +
                            "' --gtest_filter=DockerClientErrors.PermissionDeniedHintsAtTheDockerGroup >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return;
  }
  DockerStandin engine;
  ASSERT_EQ(chmod(engine.socket_path().c_str(), 0), 0);
  DockerClient client(engine.socket_path());
  const auto v = client.ping();
  ASSERT_FALSE(v);
  EXPECT_THAT(v.error().message, HasSubstr(": Permission denied"));
  EXPECT_THAT(v.error().message, HasSubstr("'docker' group"));
}

}  // namespace
}  // namespace gf::launch
