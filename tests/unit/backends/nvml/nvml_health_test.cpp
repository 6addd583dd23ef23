// The NVML backend's health readings and XID event thread against the fake NVML: the H100 capture's
// values, retired pages absent on Hopper (never 0), probe-once, XIDs injected while the backend runs,
// registration failures, old drivers, and the thread stopping before nvmlShutdown.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "backends/nvml/nvml_device.hpp"
#include "core/gpu_health.hpp"
#include "fake_nvml_harness.hpp"
#include "support/eventually.hpp"

namespace gf::backends::nvml_test {
namespace {

using core::Absent;
using ::testing::HasSubstr;
using json = nlohmann::json;

json health_gpu(unsigned index) {
  return json{{"uuid", "GPU-health-" + std::to_string(index)},
              {"memory_total_mib", 1000},
              {"memory_used_mib", 10},
              {"temperature_c", 40},
              {"supported_event_types", 0xFF9F}};
}

class NvmlHealthTest : public FakeNvmlTest {
 protected:
  int inject(unsigned gpu, unsigned long long xid) const {
    auto fn = fake().library().function<int (*)(unsigned, unsigned long long)>("fake_nvml_inject_xid");
    return fn ? fn(gpu, xid) : -1;
  }
  int event_sets() const {
    auto fn = fake().library().function<int (*)()>("fake_nvml_event_sets");
    return fn ? fn() : -1;
  }
  // Snapshots until GPU `gpu` reports `xid` as its last XID (the event thread delivers it within a
  // wait); fails the test after about ten seconds, which only a broken thread takes.
  core::Snapshot snapshot_until_xid(Backend& b, unsigned gpu, unsigned xid) {
    core::Snapshot snap;
    bool failed = false;
    const bool reached = test::eventually(
        [&] {
          auto s = b.snapshot();
          EXPECT_TRUE(s) << s.error().message;
          if (!s) {
            failed = true;  // said above; stop waiting
            return true;
          }
          snap = std::move(*s);
          return gpu < snap.gpus.size() && snap.gpus[gpu].last_xid.has_value() && *snap.gpus[gpu].last_xid == xid;
        },
        std::chrono::seconds(10), std::chrono::milliseconds(10));
    if (!reached && !failed) ADD_FAILURE() << "XID " << xid << " never reached GPU " << gpu;
    return snap;
  }
};

TEST_F(NvmlHealthTest, TheH100CaptureReadsAsRecorded) {
  auto backend = open(fixture("h100_580_health.json"), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus.size(), 1u);
  const auto& g = snap->gpus[0];
  EXPECT_EQ(g.uuid, "GPU-a7c70913-7752-3821-b707-c7ff1a4a3ce5");
  for (const auto* r : {&g.ecc_corrected_volatile, &g.ecc_uncorrected_volatile, &g.ecc_corrected_aggregate,
                        &g.ecc_uncorrected_aggregate, &g.remapped_rows_correctable, &g.remapped_rows_uncorrectable,
                        &g.pcie_replay_count, &g.power_violation_us, &g.thermal_violation_us}) {
    ASSERT_TRUE(r->has_value());
    EXPECT_EQ(**r, 0u);
  }
  EXPECT_EQ(g.remapped_rows_pending, core::Reading<bool>(false));
  EXPECT_EQ(g.remapped_rows_failure, core::Reading<bool>(false));
  EXPECT_EQ(g.clock_event_reasons, core::Reading<std::uint64_t>(4));
  // Hopper remaps rows: retired pages are not supported, which is not zero.
  EXPECT_FALSE(g.retired_pages_sbe.has_value());
  EXPECT_EQ(g.retired_pages_sbe.why(), Absent::NotSupported);
  EXPECT_EQ(g.retired_pages_dbe.why(), Absent::NotSupported);
  EXPECT_EQ(g.retired_pages_pending.why(), Absent::NotSupported);
  // Registered for XIDs (65439 has bit 0x8), none seen.
  EXPECT_EQ(g.last_xid, core::Reading<unsigned>(0));
  EXPECT_TRUE(g.recent_xids.empty());
  EXPECT_TRUE(core::judge_health(g).healthy);
  EXPECT_TRUE(snap->warnings.empty()) << snap->warnings.front();

  // Probe once, then skip: the retired-page queries are not asked again.
  ASSERT_TRUE((*backend)->snapshot());
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetRetiredPages"), 2u);  // once per cause
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetRetiredPagesPendingStatus"), 1u);
  // Supported, but a slow field: asked again only after kSlowReadInterval (nvml_slow_fields_test.cpp).
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetRemappedRows"), 1u);
  clock_.advance(nvml::kSlowReadInterval);
  ASSERT_TRUE((*backend)->snapshot());
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetRemappedRows"), 2u);
  EXPECT_EQ(fake().calls_of("nvmlDeviceGetRetiredPages"), 2u);  // unsupported stays unasked
}

TEST_F(NvmlHealthTest, CountersConvertToTheFieldUnits) {
  json g = health_gpu(0);
  g.update(json{{"ecc_corrected_volatile", 12},
                {"ecc_corrected_aggregate", 3400},
                {"ecc_uncorrected_aggregate", 2},
                {"retired_pages_sbe", 3},
                {"retired_pages_dbe", 1},
                {"retired_pages_pending", 1},
                {"remapped_rows_correctable", 5},
                {"remapped_rows_uncorrectable", 1},
                {"remapped_rows_pending", 1},
                {"remapped_rows_failure", 1},
                {"pcie_replay_count", 77},
                {"power_violation_us", 1500000},
                {"thermal_violation_us", 250}});
  auto backend = open(write_scenario(json{{"gpus", json::array({g})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  const auto& r = snap->gpus.at(0);
  EXPECT_EQ(r.ecc_corrected_volatile, core::Reading<std::uint64_t>(12));
  EXPECT_EQ(r.ecc_corrected_aggregate, core::Reading<std::uint64_t>(3400));
  EXPECT_EQ(r.ecc_uncorrected_aggregate, core::Reading<std::uint64_t>(2));
  EXPECT_EQ(r.retired_pages_sbe, core::Reading<std::uint64_t>(3));
  EXPECT_EQ(r.retired_pages_dbe, core::Reading<std::uint64_t>(1));
  EXPECT_EQ(r.retired_pages_pending, core::Reading<bool>(true));
  EXPECT_EQ(r.remapped_rows_correctable, core::Reading<std::uint64_t>(5));
  EXPECT_EQ(r.remapped_rows_uncorrectable, core::Reading<std::uint64_t>(1));
  EXPECT_EQ(r.remapped_rows_pending, core::Reading<bool>(true));
  EXPECT_EQ(r.remapped_rows_failure, core::Reading<bool>(true));
  EXPECT_EQ(r.pcie_replay_count, core::Reading<std::uint64_t>(77));
  EXPECT_EQ(r.power_violation_us, core::Reading<std::uint64_t>(1500000));  // NVML's ns / 1000
  EXPECT_EQ(r.thermal_violation_us, core::Reading<std::uint64_t>(250));
  const auto verdict = core::judge_health(r);
  EXPECT_FALSE(verdict.healthy);
  ASSERT_EQ(verdict.problems.size(), 1u);
  EXPECT_EQ(verdict.problems[0].code, "row_remap_failure");
}

TEST_F(NvmlHealthTest, AnXidInjectedWhileRunningReachesTheReading) {
  auto backend = open(write_scenario(json{{"gpus", json::array({health_gpu(0), health_gpu(1)})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto first = (*backend)->snapshot();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->gpus.at(1).last_xid, core::Reading<unsigned>(0));
  EXPECT_EQ(event_sets(), 1);

  ASSERT_EQ(inject(1, 13), 0);
  ASSERT_EQ(inject(1, 79), 0);
  const auto snap = snapshot_until_xid(**backend, 1, 79);
  const auto& g = snap.gpus.at(1);
  ASSERT_EQ(g.recent_xids.size(), 2u);
  EXPECT_EQ(g.recent_xids[0].xid, 13u);
  EXPECT_EQ(g.recent_xids[1].xid, 79u);
  EXPECT_EQ(g.recent_xids[1].time, clock_.wall_now());              // stamped by the backend's clock
  EXPECT_EQ(snap.gpus.at(0).last_xid, core::Reading<unsigned>(0));  // the other GPU saw nothing

  const auto verdict = core::judge_health(g);
  EXPECT_FALSE(verdict.healthy);
  ASSERT_EQ(verdict.problems.size(), 1u);
  EXPECT_EQ(verdict.problems[0].code, "xid_79");
  EXPECT_THAT(verdict.problems[0].message, HasSubstr("fallen off the bus"));
  ASSERT_EQ(verdict.notes.size(), 1u);
  EXPECT_EQ(verdict.notes[0].code, "xid_13");
  EXPECT_EQ(verdict.summary, "unhealthy: XID 79 (GPU has fallen off the bus)");
}

TEST_F(NvmlHealthTest, ScenarioEventsArriveAfterTheirDelay) {
  json g = health_gpu(0);
  g["xid_events"] = json::array({{{"xid", 31}, {"after_ms", 20}}, {{"xid", 48}, {"after_ms", 40}}});
  auto backend = open(write_scenario(json{{"gpus", json::array({g})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  const auto snap = snapshot_until_xid(**backend, 0, 48);
  ASSERT_EQ(snap.gpus.at(0).recent_xids.size(), 2u);
  EXPECT_EQ(snap.gpus.at(0).recent_xids[0].xid, 31u);
  EXPECT_FALSE(core::judge_health(snap.gpus.at(0)).healthy);
}

TEST_F(NvmlHealthTest, ApplicationFaultsNeverPushOutACriticalXid) {
  auto backend = open(write_scenario(json{{"gpus", json::array({health_gpu(0)})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  ASSERT_EQ(inject(0, 62), 0);
  for (int i = 0; i < 40; ++i) ASSERT_EQ(inject(0, 13), 0);
  ASSERT_EQ(inject(0, 43), 0);
  const auto snap = snapshot_until_xid(**backend, 0, 43);
  const auto& xids = snap.gpus.at(0).recent_xids;
  EXPECT_EQ(xids.size(), 16u);  // bounded
  EXPECT_EQ(xids.front().xid, 62u);
  EXPECT_EQ(xids.back().xid, 43u);
  const auto verdict = core::judge_health(snap.gpus.at(0));
  EXPECT_FALSE(verdict.healthy);
  EXPECT_EQ(verdict.summary, "unhealthy: XID 62 (internal micro-controller halt)");
}

TEST_F(NvmlHealthTest, TheThreadOutlivesALostGpuAndKeepsItsXid) {
  json g1 = health_gpu(1);
  g1["lost"] = {false, false, true};  // handle lookups: XID registration, first snapshot, then lost
  auto backend = open(write_scenario(json{{"gpus", json::array({health_gpu(0), g1})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto first = (*backend)->snapshot();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->gpus.at(1).health, core::Health::Ok);
  auto second = (*backend)->snapshot();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->gpus.at(1).health, core::Health::Lost);
  // The driver reports the XID after the GPU went: the thread still records it.
  ASSERT_EQ(inject(1, 79), 0);
  const auto snap = snapshot_until_xid(**backend, 1, 79);
  EXPECT_EQ(snap.gpus.at(1).health, core::Health::Lost);
  const auto verdict = core::judge_health(snap.gpus.at(1));
  ASSERT_EQ(verdict.problems.size(), 2u);
  EXPECT_EQ(verdict.problems[0].code, "gpu_lost");
  EXPECT_EQ(verdict.problems[1].code, "xid_79");
}

TEST_F(NvmlHealthTest, RegistrationWithoutPermissionSaysWhy) {
  json g = health_gpu(0);
  g["register_events_error"] = 4;
  auto backend = open(write_scenario(json{{"gpus", json::array({g, g})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap);
  for (const auto& r : snap->gpus) {
    EXPECT_FALSE(r.last_xid.has_value());
    EXPECT_EQ(r.last_xid.why(), Absent::NoPermission);
  }
  ASSERT_EQ(snap->warnings.size(), 1u);
  EXPECT_THAT(snap->warnings[0], HasSubstr("GPU 0,1: Insufficient Permissions"));
  EXPECT_THAT(snap->warnings[0], HasSubstr("needs root"));
  EXPECT_EQ(event_sets(), 0);  // nothing registered: no set kept, no thread
}

TEST_F(NvmlHealthTest, GpusWithoutXidEventsSayNotSupportedQuietly) {
  json g = health_gpu(0);
  g.erase("supported_event_types");  // the query answers NOT_SUPPORTED
  json h = health_gpu(1);
  h["supported_event_types"] = 0x3;  // ECC events only
  auto backend = open(write_scenario(json{{"gpus", json::array({g, h})}}), GF_FAKE_NVML, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap);
  for (const auto& r : snap->gpus) EXPECT_EQ(r.last_xid.why(), Absent::NotSupported);
  EXPECT_TRUE(snap->warnings.empty()) << snap->warnings.front();
}

TEST_F(NvmlHealthTest, AnOldDriverHasNoRemappingAndNoEvents) {
  json g = health_gpu(0);
  g["remapped_rows_failure"] = 1;
  g["retired_pages_sbe"] = 2;
  auto backend = open(write_scenario(json{{"gpus", json::array({g})}}), GF_FAKE_NVML_OLD, true);
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap);
  const auto& r = snap->gpus.at(0);
  EXPECT_EQ(r.remapped_rows_failure.why(), Absent::NotSupported);
  EXPECT_EQ(r.retired_pages_sbe, core::Reading<std::uint64_t>(2));
  EXPECT_EQ(r.last_xid.why(), Absent::NotSupported);
  EXPECT_TRUE(snap->warnings.empty()) << snap->warnings.front();
}

TEST_F(NvmlHealthTest, AOneShotBackendDoesNotListenAndSaysNotQueried) {
  auto backend = open(fixture("h100_580_health.json"));  // xid_events off, as `gpufleet status` has it
  ASSERT_TRUE(backend) << backend.error().message;
  auto snap = (*backend)->snapshot();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->gpus.at(0).last_xid.why(), Absent::NotQueried);
  EXPECT_EQ(event_sets(), 0);
  EXPECT_EQ(fake().calls_of("nvmlDeviceRegisterEvents"), 0u);
}

TEST_F(NvmlHealthTest, TheThreadStopsAndFreesItsSetBeforeShutdown) {
  {
    auto backend = open(write_scenario(json{{"gpus", json::array({health_gpu(0)})}}), GF_FAKE_NVML, true);
    ASSERT_TRUE(backend) << backend.error().message;
    ASSERT_TRUE((*backend)->snapshot());
    EXPECT_EQ(event_sets(), 1);
    EXPECT_EQ(fake().init_refcount(), 1);
  }
  EXPECT_EQ(event_sets(), 0);
  EXPECT_EQ(fake().init_refcount(), 0);
  // The set was freed while NVML was still initialised (a free after shutdown answers UNINITIALIZED
  // and would leave the set behind, which the count above would show).
  EXPECT_EQ(fake().calls_of("nvmlEventSetFree"), 1u);
}

}  // namespace
}  // namespace gf::backends::nvml_test
