// `gpufleet run --docker` end to end: the real binary and Docker client against the stand-in engine.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "fakes/docker_standin.hpp"
#include "platform/subprocess.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(DockerRun, ContainerGetsTheLeasedGpusThroughDeviceRequests) {
  const gf::test::TempDir dir;
  gf::fakes::DockerStandinConfig cfg;
  cfg.exit_code = 7;
  cfg.run_time = 300ms;
  cfg.logs = {{1, "hello from the container\n"}};
  gf::fakes::DockerStandin engine(cfg);
  setenv("DOCKER_HOST", ("unix://" + engine.socket_path()).c_str(), 1);
  setenv("GPUFLEET_DB", (dir / "gf.db").c_str(), 1);
  setenv("GPUFLEET_SIM_SCENARIO", GF_FIXTURES_DIR "/sim/two_idle.json", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);  // must not leak into the container

  auto r = gf::platform::run_process(
      {GF_BINARY, "--backend", "sim", "run", "--gpus", "2", "--min-memory-mb", "1000", "-n", "0.05", "--json",
       "--docker", "nvcr.io/nvidia/pytorch:24.01-py3", "--", "python", "-c", "print(1)"},
      gf::platform::RunOptions{60s});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->exit_code, 7) << r->err;
  EXPECT_NE(r->out.find("hello from the container"), std::string::npos);
  auto body = engine.last_create_body();
  ASSERT_TRUE(body);
  auto create = nlohmann::json::parse(*body);
  EXPECT_EQ(create["Image"], "nvcr.io/nvidia/pytorch:24.01-py3");
  EXPECT_EQ(create["Cmd"], nlohmann::json::array({"python", "-c", "print(1)"}));
  const auto& dr = create["HostConfig"]["DeviceRequests"];
  ASSERT_EQ(dr.size(), 1u);
  EXPECT_EQ(dr[0]["DeviceIDs"].size(), 2u);
  EXPECT_EQ(dr[0]["Capabilities"], nlohmann::json::parse(R"([["gpu"]])"));
  for (const auto& e : create.value("Env", nlohmann::json::array()))
    EXPECT_EQ(e.get<std::string>().rfind("CUDA_VISIBLE_DEVICES=", 0), std::string::npos);
  EXPECT_TRUE(engine.live_containers().empty());  // removed after the run
  // Recorded like any run, with the container.
  const auto rec = nlohmann::json::parse(r->out.substr(r->out.find('{')));
  EXPECT_EQ(rec["exit_code"], 7);
  EXPECT_EQ(rec["docker"]["image"], "nvcr.io/nvidia/pytorch:24.01-py3");
  EXPECT_FALSE(rec["docker"]["container_id"].get<std::string>().empty());
  EXPECT_EQ(rec["gpu_info"]["count"], 2);
  unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
