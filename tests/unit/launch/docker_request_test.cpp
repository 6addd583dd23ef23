// The pure parts of the Docker launcher: the create body and DOCKER_HOST parsing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "launch/docker.hpp"

namespace gf::launch {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

TEST(CreateRequestBody, GpusBecomeOneDeviceRequestLikeDockerRunGpus) {
  DockerRunSpec spec;
  spec.image = "ubuntu:22.04";
  spec.gpu_ids = {"0", "3"};
  const auto body = json::parse(create_request_body(spec));
  EXPECT_EQ(body["HostConfig"]["DeviceRequests"], json::parse(R"([
      {"Driver": "", "Count": 0, "DeviceIDs": ["0", "3"], "Capabilities": [["gpu"]]}])"));
}

TEST(CreateRequestBody, NoGpusMeansNoDeviceRequestAndNoCmdMeansTheImageDefault) {
  DockerRunSpec spec;
  spec.image = "busybox";
  const auto body = json::parse(create_request_body(spec));
  EXPECT_FALSE(body["HostConfig"].contains("DeviceRequests")) << body.dump();
  EXPECT_FALSE(body.contains("Cmd")) << "an empty Cmd would override the image's CMD";
  EXPECT_EQ(body["Env"], json::array());
  EXPECT_EQ(body["Labels"], json::object());
}

TEST(CreateRequestBody, GpuVisibilityVariablesAreDroppedWhateverTheirForm) {
  DockerRunSpec spec;
  spec.image = "x";
  spec.gpu_ids = {"0"};
  spec.env = {"CUDA_VISIBLE_DEVICES=1",
              "CUDA_VISIBLE_DEVICES",
              "CUDA_VISIBLE_DEVICES=",
              "NVIDIA_VISIBLE_DEVICES=all",
              "CUDA_VISIBLE_DEVICES_X=keep",
              "MY_CUDA_VISIBLE_DEVICES=keep",
              "A=b=c"};
  const auto body = json::parse(create_request_body(spec));
  EXPECT_EQ(body["Env"], json({"CUDA_VISIBLE_DEVICES_X=keep", "MY_CUDA_VISIBLE_DEVICES=keep", "A=b=c"}));
}

TEST(DockerHost, UnsetOrEmptyIsTheDefaultSocket) {
  const auto c = DockerClient::from_docker_host("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->socket_path(), "/var/run/docker.sock");
  EXPECT_EQ(c->api_version(), "1.41");
}

TEST(DockerHost, UnixUrlGivesThePath) {
  const auto c = DockerClient::from_docker_host("unix:///run/user/1000/docker.sock");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->socket_path(), "/run/user/1000/docker.sock");
}

TEST(DockerHost, OtherTransportsAreRefusedClearly) {
  for (const char* host : {"tcp://10.0.0.5:2375", "ssh://me@box", "unix://", "/var/run/docker.sock"}) {
    const auto c = DockerClient::from_docker_host(host);
    ASSERT_FALSE(c) << host;
    EXPECT_THAT(c.error().message, HasSubstr(std::string("DOCKER_HOST=") + host + " is not supported"));
  }
}

TEST(DockerHost, FromEnvironmentReadsDockerHost) {
  ASSERT_EQ(setenv("DOCKER_HOST", "unix:///tmp/gf-elsewhere.sock", 1), 0);
  const auto c = DockerClient::from_environment();
  unsetenv("DOCKER_HOST");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->socket_path(), "/tmp/gf-elsewhere.sock");
}

}  // namespace
}  // namespace gf::launch

namespace gf::launch {
namespace {

TEST(CreateRequestBody, VolumesAndPortsAreWhatDockerRunSends) {
  DockerRunSpec spec;
  spec.image = "lmsysorg/sglang:latest";
  spec.binds = {"/mnt/data/models/llama:/model:ro"};
  spec.ports = {{"127.0.0.1", 30000, 8000}, {"", 9000, 9001}};
  const auto body = nlohmann::json::parse(create_request_body(spec));
  EXPECT_EQ(body["HostConfig"]["Binds"], nlohmann::json::array({"/mnt/data/models/llama:/model:ro"}));
  EXPECT_EQ(body["ExposedPorts"], nlohmann::json::parse(R"({"8000/tcp": {}, "9001/tcp": {}})"));
  EXPECT_EQ(body["HostConfig"]["PortBindings"]["8000/tcp"],
            nlohmann::json::parse(R"([{"HostIp": "127.0.0.1", "HostPort": "30000"}])"));
  EXPECT_EQ(body["HostConfig"]["PortBindings"]["9001/tcp"],
            nlohmann::json::parse(R"([{"HostIp": "", "HostPort": "9000"}])"));
  DockerRunSpec plain;
  plain.image = "x";
  const auto none = nlohmann::json::parse(create_request_body(plain));
  EXPECT_FALSE(none["HostConfig"].contains("Binds"));
  EXPECT_FALSE(none.contains("ExposedPorts"));
}

TEST(DockerArguments, BindsAndPortsAreCheckedWithOneSentence) {
  EXPECT_EQ(*parse_bind("/data:/data"), "/data:/data");
  EXPECT_EQ(*parse_bind("/data:/in:ro"), "/data:/in:ro");
  for (const char* bad : {"data:/data", "/data", "/a:b", "/a:/b:rx", "/a:/b:ro:x", "/a\n:/b"}) {
    auto r = parse_bind(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("volume"), std::string::npos) << r.error().message;
  }
  auto p = parse_port("8000:80");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->host_port, 8000u);
  EXPECT_EQ(p->container_port, 80u);
  EXPECT_TRUE(p->host_ip.empty());
  p = parse_port("127.0.0.1:30000:8000");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->host_ip, "127.0.0.1");
  for (const char* bad : {"8000", "0:80", "70000:80", "a:80", ":80", "x y:1:2"}) {
    auto r = parse_port(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("port"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace gf::launch
