// The fake NVML itself, called directly through its C ABI: if the fake drifts from NVML's
// behaviour, the backend tests prove nothing. Uses the backend's own ABI declarations, so a layout
// disagreement between the two sides fails here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ctime>

#include "backends/nvml/nvml_abi.hpp"
#include "fake_nvml_harness.hpp"

namespace gf::backends::nvml_test {
namespace {

namespace abi = gf::backends::nvml;
using json = nlohmann::json;

// The fake's entry points, resolved from the test's own handle.
struct Calls {
  explicit Calls(const platform::DynamicLibrary& lib) : lib_(lib) {}
  template <class Fn>
  Fn* get(const char* name) const {
    auto* fn = lib_.function<Fn*>(name);
    EXPECT_NE(fn, nullptr) << name;
    return fn;
  }
  const platform::DynamicLibrary& lib_;
};

using FnTopology = abi::Return(abi::Device, abi::Device, int*);
using FnNvLinkState = abi::Return(abi::Device, unsigned, int*);
using FnNvLinkRemotePci = abi::Return(abi::Device, unsigned, abi::PciInfo*);

class FakeNvmlLibraryTest : public FakeNvmlTest {
 protected:
  // nvmlInit_v2 on `scenario`; the test shuts down in TearDown.
  void init(const std::string& scenario) {
    ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
    ASSERT_EQ(calls().get<abi::FnVoid>("nvmlInit_v2")(), abi::kSuccess);
    initialised_ = true;
  }
  abi::Device handle(unsigned index) {
    abi::Device device = nullptr;
    EXPECT_EQ(calls().get<abi::FnHandleByIndex>("nvmlDeviceGetHandleByIndex_v2")(index, &device), abi::kSuccess);
    return device;
  }
  void TearDown() override {
    if (initialised_) {
      EXPECT_EQ(calls().get<abi::FnVoid>("nvmlShutdown")(), abi::kSuccess);
    }
    FakeNvmlTest::TearDown();
  }
  Calls calls() const { return Calls(fake().library()); }

  bool initialised_ = false;
};

TEST_F(FakeNvmlLibraryTest, ProcessListsFollowTheCountProtocol) {
  init(write_scenario(json::parse(R"({"gpus": [{"compute_processes": [
      {"pid": 10, "used_memory_mib": 1}, {"pid": 11, "used_memory_mib": null},
      {"pid": 12, "used_memory_mib": 3, "gpu_instance_id": 2, "compute_instance_id": 1}]}]})")));
  auto* list = calls().get<abi::FnDeviceProcesses>("nvmlDeviceGetComputeRunningProcesses_v3");
  abi::Device dev = handle(0);

  unsigned count = 0;
  EXPECT_EQ(list(dev, &count, nullptr), abi::kErrorInsufficientSize);
  EXPECT_EQ(count, 3u);
  abi::ProcessInfoV2 infos[8] = {};
  count = 2;
  EXPECT_EQ(list(dev, &count, infos), abi::kErrorInsufficientSize);
  EXPECT_EQ(count, 3u);
  count = 8;
  ASSERT_EQ(list(dev, &count, infos), abi::kSuccess);
  EXPECT_EQ(count, 3u);
  EXPECT_EQ(infos[0].pid, 10u);
  EXPECT_EQ(infos[0].used_gpu_memory_bytes, 1024ULL * 1024ULL);
  EXPECT_EQ(infos[0].gpu_instance_id, 0xFFFFFFFFu);  // MIG off
  EXPECT_EQ(infos[1].used_gpu_memory_bytes, abi::kValueNotAvailable);
  EXPECT_EQ(infos[2].gpu_instance_id, 2u);
  EXPECT_EQ(infos[2].compute_instance_id, 1u);
  EXPECT_EQ(list(dev, nullptr, infos), 2);  // INVALID_ARGUMENT

  // The v1 function writes the 16-byte layout.
  abi::ProcessInfoV1 v1[4] = {};
  count = 4;
  ASSERT_EQ(calls().get<abi::FnDeviceProcessesV1>("nvmlDeviceGetComputeRunningProcesses")(dev, &count, v1),
            abi::kSuccess);
  EXPECT_EQ(v1[2].pid, 12u);
  EXPECT_EQ(v1[2].used_gpu_memory_bytes, 3ULL * 1024 * 1024);

  // No processes: zero count and a null buffer are fine.
  count = 0;
  EXPECT_EQ(calls().get<abi::FnDeviceProcesses>("nvmlDeviceGetGraphicsRunningProcesses_v3")(dev, &count, nullptr),
            abi::kSuccess);
  EXPECT_EQ(count, 0u);
}

TEST_F(FakeNvmlLibraryTest, MemoryV2ChecksTheStructVersion) {
  init(write_scenario(json::parse(R"({"gpus": [{"memory_total_mib": 100, "memory_used_mib": 10,
                                                 "memory_reserved_mib": 5}]})")));
  auto* info = calls().get<abi::FnDeviceMemoryV2>("nvmlDeviceGetMemoryInfo_v2");
  abi::MemoryV2 m{};
  m.version = 1;
  EXPECT_EQ(info(handle(0), &m), abi::kErrorArgumentVersionMismatch);
  m.version = abi::kMemoryV2Version;
  ASSERT_EQ(info(handle(0), &m), abi::kSuccess);
  EXPECT_EQ(m.total_bytes, 100ULL << 20);
  EXPECT_EQ(m.reserved_bytes, 5ULL << 20);
  EXPECT_EQ(m.used_bytes, 10ULL << 20);
  EXPECT_EQ(m.free_bytes, 85ULL << 20);
  abi::Memory v1{};
  ASSERT_EQ(calls().get<abi::FnDeviceMemory>("nvmlDeviceGetMemoryInfo")(handle(0), &v1), abi::kSuccess);
  EXPECT_EQ(v1.used_bytes, 15ULL << 20);
}

TEST_F(FakeNvmlLibraryTest, SteppedValuesClampWrapCountAndRewind) {
  init(write_scenario(json::parse(R"({"gpus": [{
      "temperature_c": [1, 2],
      "fan_pct": {"steps": [1, 2], "mode": "wrap"},
      "power_draw_w": {"start": 1.5, "increment": 0.5},
      "performance_state": [0, {"error": 999}, "not_supported"]}]})")));
  abi::Device dev = handle(0);
  auto read = [&](const char* fn_name) {
    unsigned v = 0;
    const abi::Return r = calls().get<abi::FnDeviceUnsigned>(fn_name)(dev, &v);
    return r == abi::kSuccess ? static_cast<long long>(v) : -static_cast<long long>(r);
  };
  auto temperature = [&] {
    unsigned c = 0;
    EXPECT_EQ(calls().get<abi::FnDeviceUnsignedBy>("nvmlDeviceGetTemperature")(dev, 0, &c), abi::kSuccess);
    return c;
  };
  EXPECT_EQ(temperature(), 1u);
  EXPECT_EQ(temperature(), 2u);
  EXPECT_EQ(temperature(), 2u);  // clamped
  EXPECT_EQ(read("nvmlDeviceGetFanSpeed"), 1);
  EXPECT_EQ(read("nvmlDeviceGetFanSpeed"), 2);
  EXPECT_EQ(read("nvmlDeviceGetFanSpeed"), 1);  // wrapped
  EXPECT_EQ(read("nvmlDeviceGetPowerUsage"), 1500);
  EXPECT_EQ(read("nvmlDeviceGetPowerUsage"), 2000);
  EXPECT_EQ(read("nvmlDeviceGetPowerUsage"), 2500);
  auto* pstate = calls().get<abi::FnDeviceInt>("nvmlDeviceGetPerformanceState");
  int p = -1;
  EXPECT_EQ(pstate(dev, &p), abi::kSuccess);
  EXPECT_EQ(pstate(dev, &p), abi::kErrorUnknown);
  EXPECT_EQ(pstate(dev, &p), abi::kErrorNotSupported);
  // A key the scenario leaves out is NOT_SUPPORTED.
  EXPECT_EQ(read("nvmlDeviceGetEnforcedPowerLimit"), -abi::kErrorNotSupported);

  fake().reset();
  EXPECT_EQ(fake().calls(), 0u);
  EXPECT_EQ(temperature(), 1u);   // rewound
  EXPECT_EQ(fake().calls(), 1u);  // just the temperature
}

TEST_F(FakeNvmlLibraryTest, InitIsReferenceCountedAndInitErrorFails) {
  auto* init_v2 = calls().get<abi::FnVoid>("nvmlInit_v2");
  auto* shutdown = calls().get<abi::FnVoid>("nvmlShutdown");
  unsigned n = 0;
  EXPECT_EQ(calls().get<abi::FnCount>("nvmlDeviceGetCount_v2")(&n), 1);  // UNINITIALIZED
  EXPECT_EQ(shutdown(), 1);

  ::setenv("FAKE_NVML_SCENARIO", fixture("version_mismatch.json").c_str(), 1);
  EXPECT_EQ(init_v2(), abi::kErrorLibRmVersionMismatch);
  EXPECT_EQ(fake().init_refcount(), 0);

  ::setenv("FAKE_NVML_SCENARIO", fixture("mixed.json").c_str(), 1);
  ASSERT_EQ(init_v2(), abi::kSuccess);
  ASSERT_EQ(calls().get<abi::FnVoid>("nvmlInit")(), abi::kSuccess);
  EXPECT_EQ(fake().init_refcount(), 2);
  EXPECT_EQ(calls().get<abi::FnCount>("nvmlDeviceGetCount_v2")(&n), abi::kSuccess);
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(shutdown(), abi::kSuccess);
  EXPECT_EQ(shutdown(), abi::kSuccess);
  EXPECT_EQ(fake().init_refcount(), 0);
}

TEST_F(FakeNvmlLibraryTest, LostGpuAnswersGpuIsLostEverywhere) {
  init(fixture("mixed.json"));
  abi::Device device = nullptr;
  auto* by_index = calls().get<abi::FnHandleByIndex>("nvmlDeviceGetHandleByIndex_v2");
  EXPECT_EQ(by_index(2, &device), abi::kErrorGpuIsLost);
  EXPECT_EQ(by_index(9, &device), 2);  // INVALID_ARGUMENT
  EXPECT_STREQ(calls().get<abi::FnErrorString>("nvmlErrorString")(abi::kErrorGpuIsLost), "GPU is lost");
  unsigned fan = 0;
  EXPECT_EQ(calls().get<abi::FnDeviceUnsigned>("nvmlDeviceGetFanSpeed")(handle(0), &fan), abi::kErrorNotSupported);
}

TEST_F(FakeNvmlLibraryTest, PciInfoInBothLayouts) {
  init(fixture("eight_gpus.json"));
  abi::PciInfo v3{};
  ASSERT_EQ(calls().get<abi::FnDevicePci>("nvmlDeviceGetPciInfo_v3")(handle(0), &v3), abi::kSuccess);
  EXPECT_STREQ(v3.bus_id, "00000000:1B:00.0");
  EXPECT_STREQ(v3.bus_id_legacy, "0000:1B:00.0");
  EXPECT_EQ(v3.bus, 0x1Bu);
  EXPECT_EQ(v3.pci_device_id & 0xFFFFu, 0x10DEu);  // NVIDIA's vendor id
  abi::PciInfoLegacy v2{};
  ASSERT_EQ(calls().get<abi::FnDevicePciLegacy>("nvmlDeviceGetPciInfo_v2")(handle(4), &v2), abi::kSuccess);
  EXPECT_STREQ(v2.bus_id, "0000:9D:00.0");
  EXPECT_EQ(v2.bus, 0x9Du);
}

TEST_F(FakeNvmlLibraryTest, TopologyAndNvLinks) {
  init(fixture("eight_gpus.json"));
  auto* ancestor = calls().get<FnTopology>("nvmlDeviceGetTopologyCommonAncestor");
  auto level = [&](unsigned a, unsigned b) {
    int l = -1;
    EXPECT_EQ(ancestor(handle(a), handle(b), &l), abi::kSuccess);
    return l;
  };
  EXPECT_EQ(level(0, 1), 10);  // one PCIe switch
  EXPECT_EQ(level(1, 0), 10);
  EXPECT_EQ(level(0, 2), 40);  // same NUMA node
  EXPECT_EQ(level(0, 4), 50);  // across sockets (the default)
  EXPECT_EQ(level(3, 3), 0);

  auto* state = calls().get<FnNvLinkState>("nvmlDeviceGetNvLinkState");
  int active = -1;
  EXPECT_EQ(state(handle(0), 0, &active), abi::kSuccess);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(state(handle(0), 17, &active), abi::kSuccess);
  EXPECT_EQ(active, 1);                         // 3 peers x 6 links
  EXPECT_EQ(state(handle(0), 18, &active), 2);  // past NVML_NVLINK_MAX_LINKS

  auto* remote = calls().get<FnNvLinkRemotePci>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  abi::PciInfo peer{};
  ASSERT_EQ(remote(handle(0), 0, &peer), abi::kSuccess);
  EXPECT_STREQ(peer.bus_id, "00000000:43:00.0");  // GPU 1
  ASSERT_EQ(remote(handle(0), 6, &peer), abi::kSuccess);
  EXPECT_STREQ(peer.bus_id, "00000000:52:00.0");  // GPU 2
  ASSERT_EQ(remote(handle(5), 0, &peer), abi::kSuccess);
  EXPECT_STREQ(peer.bus_id, "00000000:9D:00.0");  // GPU 4
}

TEST_F(FakeNvmlLibraryTest, NoTopologyMeansNoNvLink) {
  init(fixture("mixed.json"));
  int active = -1;
  EXPECT_EQ(calls().get<FnNvLinkState>("nvmlDeviceGetNvLinkState")(handle(0), 0, &active), abi::kErrorNotSupported);
}

// The thread's CPU time: the fake's call cost spins on it.
long long thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

TEST_F(FakeNvmlLibraryTest, CallCostSpinsForTheCpuTimeItNames) {
  // The function's own figure, else the default: 20 ms and 5 ms of this thread's CPU, at least.
  init(write_scenario(json::parse(R"({"call_cost_us": {"nvmlDeviceGetUtilizationRates": 20000, "default": 5000},
      "gpus": [{"utilization_gpu_pct": 40, "utilization_memory_pct": 7, "temperature_c": 50}]})")));
  const abi::Device gpu = handle(0);  // (spends the default: nvmlDeviceGetHandleByIndex_v2 has no figure)
  abi::Utilization u{};
  auto before = thread_cpu_ns();
  ASSERT_EQ(calls().get<abi::FnDeviceUtilization>("nvmlDeviceGetUtilizationRates")(gpu, &u), abi::kSuccess);
  EXPECT_GE(thread_cpu_ns() - before, 20'000'000);
  EXPECT_EQ(u.gpu_pct, 40u);  // and answers as without a cost
  unsigned temp = 0;
  before = thread_cpu_ns();
  ASSERT_EQ(calls().get<abi::FnDeviceUnsignedBy>("nvmlDeviceGetTemperature")(gpu, 0, &temp), abi::kSuccess);
  EXPECT_GE(thread_cpu_ns() - before, 5'000'000);
  EXPECT_EQ(temp, 50u);
}

TEST_F(FakeNvmlLibraryTest, NegativeCallCostFailsInit) {
  ::setenv("FAKE_NVML_SCENARIO",
           write_scenario(json::parse(R"({"call_cost_us": {"default": -1}, "gpus": [{}]})")).c_str(), 1);
  EXPECT_EQ(calls().get<abi::FnVoid>("nvmlInit_v2")(), 999);  // UNKNOWN, with the reason on stderr
}

TEST_F(FakeNvmlLibraryTest, OldDriverExportsOnlyTheOldNames) {
  const auto& old = fake_old().library();
  for (const char* name :
       {"nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetMPSComputeRunningProcesses_v3", "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetMigMode", "nvmlSystemGetCudaDriverVersion_v2"})
    EXPECT_EQ(old.symbol(name), nullptr) << name;
  for (const char* name : {"nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
                           "nvmlDeviceGetPciInfo", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeRunningProcesses",
                           "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlSystemGetCudaDriverVersion"})
    EXPECT_NE(old.symbol(name), nullptr) << name;
  // The current variant has both generations, as real drivers do.
  for (const char* name : {"nvmlInit_v2", "nvmlInit", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo",
                           "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"})
    EXPECT_NE(fake().library().symbol(name), nullptr) << name;
}

}  // namespace
}  // namespace gf::backends::nvml_test
