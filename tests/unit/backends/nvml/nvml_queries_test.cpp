// How the NVML backend talks to the driver: how often it asks (probe once, then skip), how it
// grows process buffers, how GPUs lost mid-run and per-GPU failures show, and init/shutdown pairing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_nvml_harness.hpp"

namespace gf::backends::nvml_test {
namespace {

using core::Absent;
using core::Health;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

// One GPU with every field, some of which it lacks (fan, MIG, ECC) and one that fails (temperature).
json one_gpu_lacking_some_fields() {
  return json::parse(R"({
    "gpus": [{
      "memory_total_mib": 1000, "memory_used_mib": 10,
      "utilization_gpu_pct": 1, "utilization_memory_pct": 1,
      "temperature_c": {"error": 999},
      "power_draw_w": 10, "power_limit_w": 100, "energy_mj": 1,
      "fan_pct": "not_supported",
      "clock_graphics_mhz": 100, "clock_memory_mhz": 100, "clock_event_reasons": 0,
      "performance_state": 8,
      "mig_mode": "not_supported",
      "ecc_uncorrected_volatile": "not_supported",
      "persistence_mode": true
    }]
  })");
}

json healthy_gpu(unsigned index) {
  return json{{"uuid", "GPU-test-" + std::to_string(index)},
              {"memory_total_mib", 1000},
              {"memory_used_mib", 10},
              {"temperature_c", 40},
              {"fan_pct", 50},
              {"persistence_mode", true}};
}

using NvmlQueriesTest = FakeNvmlTest;

TEST_F(NvmlQueriesTest, UnsupportedFieldsAreAskedOnceThenSkipped) {
  auto backend = open(write_scenario(one_gpu_lacking_some_fields()));
  ASSERT_TRUE(backend) << backend.error().message;

  std::vector<unsigned long long> calls;
  core::Snapshot last;
  for (int i = 0; i < 3; ++i) {
    const auto before = fake().calls();
    auto snap = (*backend)->snapshot();
    ASSERT_TRUE(snap) << snap.error().message;
    calls.push_back(fake().calls() - before);
    last = std::move(*snap);
  }
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetFanSpeed"), 1u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetMigMode"), 1u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetTotalEccErrors"), 4u);  // each of the four ECC counters once
  // An error is not "not supported": it may pass, so it is asked every time.
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetTemperature"), 3u);
  // Later snapshots skip the unsupported fields, the identity (uuid, name, PCI) read once, and the GPM
  // support query (this GPU has no GPM): fan, MIG, four ECC counters, three retired-page queries,
  // remapped rows, PCIe replays, two violation policies, the three identity reads, and GPM support;
  // and the supported slow fields, asked again only after kSlowReadInterval: power limit, persistence;
  // and the energy counter, asked again only after kCounterReadInterval.
  EXPECT_EQ(calls[0] - calls[1], 20u);
  EXPECT_EQ(calls[1], calls[2]);
  // What remains, per snapshot: count, handle, memory, utilization, temperature, power, two clocks,
  // clock reasons, P-state, and three process lists.
  EXPECT_EQ(calls[1], 13u);

  const auto& g = last.gpus.at(0);
  EXPECT_EQ(g.fan_pct.why(), Absent::NotSupported);  // still reported as not supported, not "not queried"
  EXPECT_EQ(g.mig_enabled.why(), Absent::NotSupported);
  EXPECT_EQ(g.ecc_uncorrected_volatile.why(), Absent::NotSupported);
  EXPECT_EQ(g.temperature_c.why(), Absent::Error);
  EXPECT_EQ(*g.performance_state, 8u);
}

TEST_F(NvmlQueriesTest, IdentityIsReadOnceButHandlesEverySnapshot) {
  auto backend = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(backend) << backend.error().message;
  for (int i = 0; i < 3; ++i) {
    auto snap = (*backend)->snapshot();
    ASSERT_TRUE(snap) << snap.error().message;
    EXPECT_EQ(snap->gpus.at(3).uuid, "GPU-6f2a0c1e-8b1d-4c55-9a3e-610000000000");
    EXPECT_EQ(snap->gpus.at(3).pci_bus_id, "00000000:61:00.0");
  }
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetUUID"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetName"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetPciInfo_v3"), 8u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetCount_v2"), 3u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetHandleByIndex_v2"), 24u);
  EXPECT_EQ(fake().calls_of("nvmlSystemGetDriverVersion"), 1u);
}

TEST_F(NvmlQueriesTest, ProcessListGrowsOnInsufficientSize) {
  json gpu = healthy_gpu(0);
  for (unsigned pid = 1000; pid < 1040; ++pid)
    gpu["compute_processes"].push_back({{"pid", pid}, {"used_memory_mib", pid - 1000}});
  auto backend = open(write_scenario(json{{"gpus", json::array({gpu})}}));
  ASSERT_TRUE(backend) << backend.error().message;

  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto& procs = snap->gpus.at(0).processes;
  ASSERT_EQ(procs.size(), 40u);
  for (unsigned i = 0; i < 40; ++i) {
    EXPECT_EQ(procs[i].pid, 1000 + i);
    EXPECT_EQ(procs[i].used_memory_mib, std::optional<std::uint64_t>(i));
  }
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetComputeRunningProcesses_v3"), 2u);  // too small, then right

  ASSERT_TRUE((*backend)->snapshot());
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetComputeRunningProcesses_v3"), 3u);  // the larger buffer is kept
}

TEST_F(NvmlQueriesTest, GpuLostDuringARunIsReportedFromThen) {
  json gpu1 = healthy_gpu(1);
  gpu1["lost"] = {false, true};  // one step per handle lookup
  auto backend = open(write_scenario(json{{"gpus", json::array({healthy_gpu(0), gpu1})}}));
  ASSERT_TRUE(backend) << backend.error().message;

  auto first = (*backend)->snapshot();
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->gpus.at(1).health, Health::Ok);
  EXPECT_EQ(*first->gpus.at(1).temperature_c, 40);

  auto second = (*backend)->snapshot();
  ASSERT_TRUE(second) << second.error().message;
  ASSERT_EQ(second->gpus.size(), 2u);
  EXPECT_EQ(second->gpus[0].health, Health::Ok);
  EXPECT_EQ(*second->gpus[0].temperature_c, 40);
  EXPECT_EQ(second->gpus[1].health, Health::Lost);
  EXPECT_EQ(second->gpus[1].health_message, "GPU is lost");
  EXPECT_FALSE(second->gpus[1].temperature_c.has_value());
}

TEST_F(NvmlQueriesTest, GpuLostMidReadStopsQueryingIt) {
  json gpu1 = healthy_gpu(1);
  gpu1["memory_used_mib"] = {{"error", 15}};  // memory is the first query after the identity
  auto backend = open(write_scenario(json{{"gpus", json::array({healthy_gpu(0), gpu1})}}));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;

  const auto& lost = snap->gpus.at(1);
  EXPECT_EQ(lost.health, Health::Lost);
  EXPECT_EQ(lost.health_message, "GPU is lost");
  EXPECT_EQ(lost.uuid, "GPU-test-1");  // identity read before it went keeps the report useful
  EXPECT_FALSE(lost.memory_total_mib.has_value());
  EXPECT_FALSE(lost.fan_pct.has_value());
  EXPECT_FALSE(lost.persistence_mode.has_value());
  EXPECT_EQ(snap->gpus.at(0).health, Health::Ok);
  EXPECT_EQ(*snap->gpus.at(0).fan_pct, 50u);
  // Nothing after the lost answer was asked of GPU 1.
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetFanSpeed"), 1u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetPersistenceMode"), 1u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetComputeRunningProcesses_v3"), 1u);
  EXPECT_TRUE(snap->warnings.empty());
}

TEST_F(NvmlQueriesTest, HandleFailureAndResetRequiredAreErrors) {
  json gpu0 = healthy_gpu(0);
  gpu0["handle_error"] = 999;
  json gpu2 = healthy_gpu(2);
  gpu2["fan_pct"] = {{"error", 16}};
  auto backend = open(write_scenario(json{{"gpus", json::array({gpu0, healthy_gpu(1), gpu2})}}));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 3u);

  EXPECT_EQ(snap->gpus[0].index, 0u);
  EXPECT_EQ(snap->gpus[0].health, Health::Error);
  EXPECT_THAT(snap->gpus[0].health_message,
              AllOf(HasSubstr("cannot get a handle"), HasSubstr("Unknown Error"), HasSubstr("999")));
  EXPECT_FALSE(snap->gpus[0].memory_total_mib.has_value());
  EXPECT_EQ(snap->gpus[1].health, Health::Ok);
  EXPECT_EQ(snap->gpus[2].health, Health::Error);
  EXPECT_THAT(snap->gpus[2].health_message, HasSubstr("GPU requires restart"));
  EXPECT_FALSE(snap->gpus[2].memory_total_mib.has_value());
}

TEST_F(NvmlQueriesTest, UnreadableProcessListMarksVisibilityIncomplete) {
  json gpu = healthy_gpu(0);
  gpu["compute_processes"] = {{"error", 4}};
  gpu["graphics_processes"] = json::array({{{"pid", 77}, {"used_memory_mib", 5}}});
  auto backend = open(write_scenario(json{{"gpus", json::array({gpu})}}));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_FALSE(snap->process_visibility.complete);
  EXPECT_THAT(snap->process_visibility.message,
              AllOf(HasSubstr("GPU 0"), HasSubstr("compute"), HasSubstr("Insufficient Permissions")));
  ASSERT_EQ(snap->gpus.at(0).processes.size(), 1u);  // the graphics list still counts
  EXPECT_EQ(snap->gpus[0].processes[0].pid, 77u);
  EXPECT_EQ(snap->gpus[0].health, Health::Ok);
}

TEST_F(NvmlQueriesTest, NoGpusIsAnEmptySnapshotNotAnError) {
  auto backend = open(write_scenario(json{{"gpus", json::array()}}));
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_TRUE(snap->gpus.empty());
  EXPECT_EQ(snap->backend, "nvml");
}

TEST_F(NvmlQueriesTest, EveryInitIsPairedWithOneShutdown) {
  EXPECT_EQ(fake().init_refcount(), 0);
  auto a = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(fake().init_refcount(), 1);
  auto b = open(fixture("eight_gpus.json"));
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(fake().init_refcount(), 2);
  ASSERT_TRUE((*a)->snapshot());
  ASSERT_TRUE((*b)->snapshot());

  a->reset();
  EXPECT_EQ(fake().init_refcount(), 1);
  ASSERT_TRUE((*b)->snapshot());  // the other backend's library stays initialised
  b->reset();
  EXPECT_EQ(fake().init_refcount(), 0);
  EXPECT_EQ(fake().calls_of("nvmlInit_v2"), 2u);
  EXPECT_EQ(fake().calls_of("nvmlShutdown"), 2u);
}

}  // namespace
}  // namespace gf::backends::nvml_test
