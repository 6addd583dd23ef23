// MIG through NVML: the fake library's MIG device handles (the real ABI, called directly), and the
// backend's enumeration of instances, their memory, the processes' instance ids and what is never
// counted twice.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/nvml/nvml_abi.hpp"
#include "backends/nvml/nvml_mig.hpp"
#include "fake_nvml_harness.hpp"

namespace gf::backends::nvml_test {
namespace {

namespace abi = gf::backends::nvml;
using core::Absent;
using json = nlohmann::json;
using ::testing::HasSubstr;

class MigFakeLibraryTest : public FakeNvmlTest {
 protected:
  template <class Fn>
  Fn* fn(const char* name) const {
    auto* f = fake().library().function<Fn*>(name);
    EXPECT_NE(f, nullptr) << name;
    return f;
  }
  void init(const std::string& scenario) {
    ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    ASSERT_EQ(fn<abi::FnVoid>("nvmlInit_v2")(), abi::kSuccess);
    initialised_ = true;
  }
  abi::Device gpu(unsigned index) {
    abi::Device d = nullptr;
    EXPECT_EQ(fn<abi::FnHandleByIndex>("nvmlDeviceGetHandleByIndex_v2")(index, &d), abi::kSuccess);
    return d;
  }
  void TearDown() override {
    if (initialised_) {
      EXPECT_EQ(fn<abi::FnVoid>("nvmlShutdown")(), abi::kSuccess);
    }
    FakeNvmlTest::TearDown();
  }
  bool initialised_ = false;
};

TEST_F(MigFakeLibraryTest, MigDeviceHandlesAnswerAsTheDriverDoes) {
  init(fixture("mig.json"));
  auto* max = fn<abi::FnDeviceUnsigned>("nvmlDeviceGetMaxMigDeviceCount");
  auto* child = fn<abi::FnDeviceChild>("nvmlDeviceGetMigDeviceHandleByIndex");
  auto* gi = fn<abi::FnDeviceUnsigned>("nvmlDeviceGetGpuInstanceId");
  auto* ci = fn<abi::FnDeviceUnsigned>("nvmlDeviceGetComputeInstanceId");
  auto* name = fn<abi::FnDeviceString>("nvmlDeviceGetName");
  auto* uuid = fn<abi::FnDeviceString>("nvmlDeviceGetUUID");
  auto* util = fn<abi::FnDeviceUtilization>("nvmlDeviceGetUtilizationRates");
  auto* mem = fn<abi::FnDeviceMemoryV2>("nvmlDeviceGetMemoryInfo_v2");
  const abi::Device parent = gpu(0);

  unsigned n = 0;
  ASSERT_EQ(max(parent, &n), abi::kSuccess);
  EXPECT_EQ(n, 7u);
  abi::Device mig = nullptr;
  ASSERT_EQ(child(parent, 2, &mig), abi::kSuccess);
  EXPECT_NE(mig, nullptr);
  EXPECT_NE(mig, parent);                                         // a handle of its own
  EXPECT_EQ(child(parent, 3, &mig), abi::kErrorNotFound);         // sparse: nothing at index 3
  EXPECT_EQ(child(parent, 7, &mig), abi::kErrorInvalidArgument);  // past the maximum
  EXPECT_EQ(child(gpu(1), 0, &mig), abi::kErrorNotSupported);     // MIG off
  ASSERT_EQ(child(parent, 4, &mig), abi::kSuccess);

  char text[abi::kDeviceStringLength] = {};
  ASSERT_EQ(name(mig, text, sizeof text), abi::kSuccess);
  EXPECT_STREQ(text, "NVIDIA A100-SXM4-80GB MIG 1g.10gb");
  ASSERT_EQ(uuid(mig, text, sizeof text), abi::kSuccess);
  EXPECT_STREQ(text, "MIG-36c795f2-5cf7-55d6-af30-e535e79b7bb6");
  unsigned id = 99;
  ASSERT_EQ(gi(mig, &id), abi::kSuccess);
  EXPECT_EQ(id, 10u);
  ASSERT_EQ(ci(mig, &id), abi::kSuccess);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(gi(parent, &id), abi::kErrorNotSupported);  // the parent is not a MIG device
  abi::MemoryV2 m{};
  m.version = abi::kMemoryV2Version;
  ASSERT_EQ(mem(mig, &m), abi::kSuccess);
  EXPECT_EQ(m.total_bytes, 9728ULL << 20);
  EXPECT_EQ(m.used_bytes, 13ULL << 20);
  abi::Utilization u{};
  EXPECT_EQ(util(mig, &u), abi::kErrorNotSupported);
  EXPECT_EQ(max(mig, &n), abi::kErrorInvalidArgument);
}

TEST(MigProfile, ComesFromTheInstanceName) {
  EXPECT_EQ(abi::mig_profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb"), "1g.10gb");
  EXPECT_EQ(abi::mig_profile_from_name("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb"), "1c.3g.20gb");
  EXPECT_EQ(abi::mig_profile_from_name("NVIDIA H100 NVL MIG 7g.94gb "), "7g.94gb");
  EXPECT_EQ(abi::mig_profile_from_name("NVIDIA H100 80GB HBM3"), "");
  EXPECT_EQ(abi::mig_profile_from_name("X MIG two words"), "");
  EXPECT_EQ(abi::mig_profile_from_name("X MIG " + std::string(200, 'g')).size(), 32u);
}

using MigBackendTest = FakeNvmlTest;

TEST_F(MigBackendTest, ListsEachInstanceUnderItsGpu) {
  auto backend = open(fixture("mig.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 3u);
  const auto& g = snap->gpus[0];
  ASSERT_EQ(g.mig_instances.size(), 4u);
  const auto& a = g.mig_instances[0];
  EXPECT_EQ(a.uuid, "MIG-feb88891-0321-5fef-9c87-d4af3b54259e");
  EXPECT_EQ(a.profile, "3g.40gb");
  EXPECT_EQ(a.name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(a.gpu_instance_id, 2u);
  EXPECT_EQ(a.compute_instance_id, 0u);
  EXPECT_EQ(*a.memory_total_mib, 40192u);
  EXPECT_EQ(*a.memory_used_mib, 14013u);
  EXPECT_EQ(*a.memory_free_mib, 40192u - 14013u);
  const auto& last = g.mig_instances[3];
  EXPECT_EQ(last.index, 4u);  // index 3 is empty
  EXPECT_EQ(last.profile, "1g.10gb");
  EXPECT_EQ(last.gpu_instance_id, 10u);

  // The GPU's own memory is the driver's whole-GPU figure, never the instances added to it.
  EXPECT_EQ(*g.memory_total_mib, 81920u);
  EXPECT_EQ(*g.memory_used_mib, 16100u);
  EXPECT_EQ(g.utilization_pct.why(), Absent::MigEnabled);

  EXPECT_TRUE(snap->gpus[1].mig_instances.empty());  // MIG off
  EXPECT_TRUE(snap->gpus[2].mig_instances.empty());  // MIG on, nothing created yet
  EXPECT_TRUE(snap->warnings.empty()) << snap->warnings.front();
}

TEST_F(MigBackendTest, ProcessesCarryTheirInstanceIds) {
  auto backend = open(fixture("mig.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto& procs = snap->gpus[0].processes;
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[0].pid, 5001u);
  EXPECT_EQ(procs[0].gpu_instance_id, 2u);
  EXPECT_EQ(procs[0].compute_instance_id, 0u);
  EXPECT_EQ(procs[1].gpu_instance_id, 9u);
  ASSERT_EQ(snap->gpus[1].processes.size(), 1u);
  EXPECT_FALSE(snap->gpus[1].processes[0].gpu_instance_id.has_value());  // 0xFFFFFFFF: MIG off
  EXPECT_FALSE(snap->gpus[1].processes[0].compute_instance_id.has_value());
}

TEST_F(MigBackendTest, ReadsAnInstanceIdentityOnceAndItsMemoryEveryTime) {
  auto backend = open(fixture("mig.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*backend)->snapshot());
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMaxMigDeviceCount"), 2u);            // once per MIG GPU
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMigDeviceHandleByIndex"), 3u * 14);  // 7 indices, 2 GPUs
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetGpuInstanceId"), 4u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetName"), 3u + 4u);  // 3 GPUs, 4 instances
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMemoryInfo_v2"), 3u * (3 + 4));
}

TEST_F(MigBackendTest, AnInstanceThatCannotBeReadIsSaidSo) {
  auto path = write_scenario(json::parse(R"({"gpus": [{"mig_mode": 1, "memory_total_mib": 1000,
      "memory_used_mib": 1, "mig_devices": [
        {"uuid": "MIG-aaaa", "profile": "1g.5gb", "gpu_instance_id": 7, "compute_instance_id": 0,
         "memory_total_mib": {"error": 999}, "memory_used_mib": 1},
        {"uuid": "MIG-bbbb", "profile": "1g.5gb", "gpu_instance_id": {"error": 4}, "compute_instance_id": 0,
         "memory_total_mib": 10, "memory_used_mib": 1}]}]})"));
  auto backend = open(path);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto& g = snap->gpus[0];
  ASSERT_EQ(g.mig_instances.size(), 1u);  // the one without its ids is left out, not given id 0
  EXPECT_EQ(g.mig_instances[0].uuid, "MIG-aaaa");
  EXPECT_EQ(g.mig_instances[0].memory_used_mib.why(), Absent::Error);
  ASSERT_EQ(snap->warnings.size(), 2u);
  EXPECT_THAT(snap->warnings[0], HasSubstr("GPU 0: MIG device 0: cannot read its memory"));
  EXPECT_THAT(snap->warnings[1], HasSubstr("GPU 0: MIG device 1: cannot read its GPU instance id"));
}

TEST_F(MigBackendTest, AParentLostDuringEnumerationIsLost) {
  // "lost" steps once per handle lookup: the second snapshot finds the GPU gone.
  auto path = write_scenario(json::parse(R"({"gpus": [{"mig_mode": 1, "memory_total_mib": 1000,
      "memory_used_mib": 1, "lost": [false, true],
      "mig_devices": [{"uuid": "MIG-aaaa", "profile": "1g.5gb", "gpu_instance_id": 7,
                       "compute_instance_id": 0, "memory_total_mib": 10, "memory_used_mib": 1}]}]})"));
  auto backend = open(path);
  ASSERT_TRUE(backend) << backend.error().message;
  auto first = (*backend)->snapshot();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->gpus[0].mig_instances.size(), 1u);
  auto second = (*backend)->snapshot();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->gpus[0].health, core::Health::Lost);
  EXPECT_TRUE(second->gpus[0].mig_instances.empty());
}

}  // namespace
}  // namespace gf::backends::nvml_test
