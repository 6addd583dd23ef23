// The backend registry: names, the CLI's choices, and auto-detection reaching the intel backend.
#include <gtest/gtest.h>

#include <string>

#include "backends/backend.hpp"
#include "gf_test_paths.hpp"

namespace gf::backends {
namespace {

TEST(Registry, NamesComeFromTheRegistryInOrder) {
  std::string names;
  for (const auto& b : registered_backends()) names += std::string(b.name) + (b.in_auto ? "+ " : "- ");
  EXPECT_EQ(names, "nvml+ nvidia-smi+ amdgpu+ intel+ sim- ");
  EXPECT_EQ(backend_choices(), "auto, nvml, nvidia-smi, amdgpu, intel or sim");
  EXPECT_EQ(auto_detection_order(), "nvml, then nvidia-smi, then amdgpu, then intel");
}

TEST(Registry, KubernetesResourceIsTheRowsColumn) {
  EXPECT_EQ(kubernetes_resource("nvml"), "nvidia.com/gpu");
  EXPECT_EQ(kubernetes_resource("nvidia-smi"), "nvidia.com/gpu");
  EXPECT_EQ(kubernetes_resource("amdgpu"), "amd.com/gpu");
  EXPECT_EQ(kubernetes_resource("intel"), "");
  EXPECT_EQ(kubernetes_resource("sim"), "");
  EXPECT_EQ(kubernetes_resource("nope"), "");
}

TEST(Registry, ParsesKnownNamesAndListsTheChoicesOtherwise) {
  EXPECT_EQ(parse_backend_name("intel").value_or(""), "intel");
  EXPECT_EQ(parse_backend_name("auto").value_or(""), "auto");
  const auto bad = parse_backend_name("Intel");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "unknown backend 'Intel' (expected auto, nvml, nvidia-smi, amdgpu, intel or sim)");
  const auto opened = open_backend("nope", BackendOptions{});
  EXPECT_EQ(opened.backend, nullptr);
  ASSERT_EQ(opened.steps.size(), 1u);
  EXPECT_NE(opened.steps[0].detail.find("unknown backend 'nope'"), std::string::npos);
}

TEST(Registry, AutoDetectionFallsThroughToIntel) {
  BackendOptions o;
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  o.nvidia_smi = "/nonexistent/nvidia-smi";
  o.sysfs_root = std::string(GF_FIXTURES_DIR) + "/sysfs/intel";
  o.proc_root = std::string(GF_FIXTURES_DIR) + "/proc_intel";
  const auto opened = open_backend("auto", o);
  ASSERT_NE(opened.backend, nullptr);
  EXPECT_EQ(opened.backend->name(), "intel");
  ASSERT_EQ(opened.steps.size(), 4u);
  EXPECT_EQ(opened.steps[2].backend, "amdgpu");
  EXPECT_FALSE(opened.steps[2].chosen);
  EXPECT_EQ(opened.steps[3].backend, "intel");
  EXPECT_TRUE(opened.steps[3].chosen);
  ASSERT_TRUE(opened.probe.has_value());
  EXPECT_EQ(opened.probe->gpus.size(), 2u);
}

}  // namespace
}  // namespace gf::backends
