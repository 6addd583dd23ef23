// Issue 20, finding 4: the agent keeps at most 16 KiB of a user's job document, and the CLI's own record
// of a long `gpufleet run` (8 GPUs, thousands of samples each, a long command line) must still be
// recorded: app::fit_job_document thins its series (and cuts a long command) so it fits. Checked through
// the real request path: job_to_json, the protocol's parser, and node::Arbiter as a non-admin.
#include "app/job_fit.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "app/agent_client.hpp"
#include "core/stats.hpp"
#include "node/arbiter.hpp"
#include "store/node_store.hpp"
#include "support/fake_clock.hpp"
#include "support/temp_dir.hpp"
#include "wire/agent_docs.hpp"
#include "wire/agent_protocol.hpp"
#include "wire/json.hpp"

namespace gf::app {
namespace {

using nlohmann::json;

// A run's record as `gpufleet run` writes it (src/app/cmd_run.cpp): 8 GPUs sampled every 2.5 s for
// about 14 hours, so the aggregator's series is at its 2048 points per GPU.
// With `gpm`, every GPU also has the twelve profiling (GPM) readings, as a Hopper GPU has.
core::Job long_run(const std::vector<std::string>& argv, bool gpm = false) {
  core::RunAggregator agg;
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::hours(1));
  core::Snapshot s;
  for (unsigned g = 0; g < 8; ++g) {
    core::GpuReading gpu;
    gpu.index = g;
    gpu.name = "NVIDIA H100 80GB HBM3";
    gpu.uuid = "GPU-" + std::to_string(g);
    gpu.memory_total_mib = std::uint64_t{81559};
    s.gpus.push_back(std::move(gpu));
  }
  for (int i = 0; i < 20000; ++i) {
    for (auto& gpu : s.gpus) {
      const int g = static_cast<int>(gpu.index);
      gpu.utilization_pct = static_cast<unsigned>((i * 7 + g) % 101);
      gpu.memory_used_mib = std::uint64_t{40000} + static_cast<std::uint64_t>((i * 13 + g) % 997);
      gpu.temperature_c = 40 + (i + g) % 45;
      gpu.power_draw_w = 123.456 + (i * 3 + g) % 300;
      if (gpm) {
        const double u = *gpu.utilization_pct / 100.0;
        for (auto* r : {&gpu.prof_graphics_active, &gpu.prof_sm_active, &gpu.prof_sm_occupancy, &gpu.prof_tensor_active,
                        &gpu.prof_dram_active, &gpu.prof_fp64_active, &gpu.prof_fp32_active, &gpu.prof_fp16_active})
          *r = u * 0.93694;
        for (auto* r :
             {&gpu.prof_pcie_tx_bytes, &gpu.prof_pcie_rx_bytes, &gpu.prof_nvlink_tx_bytes, &gpu.prof_nvlink_rx_bytes})
          *r = 17004544.0 + i;
      }
    }
    agg.add(s, t0 + std::chrono::milliseconds(2500) * i);
  }
  json gpu_info{{"count", 8},
                {"model", "NVIDIA H100 80GB HBM3"},
                {"indices", {0, 1, 2, 3, 4, 5, 6, 7}},
                {"gpu_info", {{"allocation_method", "topology"}, {"why", {"8 GPUs on one NVLink domain"}}}}};
  core::Job job;
  job.id = "0123456789ab";
  job.name = argv.front();
  job.command = json(argv).dump();
  job.status = "succeeded";
  job.exit_code = 0;
  job.started_at_ms = 1700000000000;
  job.ended_at_ms = job.started_at_ms + 50000000;
  job.lease_id = "ba9876543210";
  const json rec{{"id", job.id},
                 {"name", job.name},
                 {"command", argv},
                 {"status", job.status},
                 {"exit_code", 0},
                 {"queued_at", "2023-11-14T22:13:20.000Z"},
                 {"started_at", "2023-11-14T22:13:20.000Z"},
                 {"ended_at", "2023-11-15T12:06:40.000Z"},
                 {"duration_seconds", 50000.0},
                 {"lease_id", job.lease_id},
                 {"backend", "nvml"},
                 {"host", "gpu-box-1"},
                 {"task", nullptr},
                 {"gpu_info", gpu_info},
                 {"metrics", {{"gpu_monitoring", wire::run_report_json(agg.report())}}}};
  job.record = rec.dump();
  job.owner.user = "alice";
  return job;
}

// The fitted job as the agent receives it: job_to_json, one request line, the protocol's parser.
core::Job through_the_socket(const core::Job& job) {
  json line = {{"id", 1}, {"op", "job_put"}, {"job", job_to_json(job)}};
  const std::string text = line.dump();
  EXPECT_LT(text.size(), kAgentMaxLine);
  auto parsed = wire::parse_agent_request(text);
  EXPECT_TRUE(parsed.op) << parsed.op.error().message;
  if (!parsed.op) return {};
  return std::get<wire::JobPutArgs>(*parsed.op).job;
}

struct JobFitTest : ::testing::Test {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp.path();
  test::FakeClock clock;
  std::unique_ptr<node::Arbiter> arb;
  const node::Peer alice{1001, 1001, 4001, "alice", false};
  void SetUp() override {
    auto st = store::NodeStore::open((dir / "gf.db").string(), [](const core::LeaseOwner&) { return true; }, clock);
    ASSERT_TRUE(st) << st.error().message;
    arb = std::make_unique<node::Arbiter>(std::move(*st), node::ReadingSource{}, node::ArbiterOptions{}, clock);
  }
  void TearDown() override { arb.reset(); }
};

TEST_F(JobFitTest, ALongRunsRecordIsThinnedUnder16KiBAndAccepted) {
  core::Job job = long_run({"python", "train.py", "--epochs", "90"});
  const json before = json::parse(job.record);
  const auto& series = before["metrics"]["gpu_monitoring"]["series"];
  ASSERT_EQ(series.size(), 8u);
  const std::size_t points = series["0"]["t"].size();
  ASSERT_GT(points, 1000u) << "a long run";
  ASSERT_GT(wire::job_document_bytes(job), node::Arbiter::kMaxUserRecordBytes) << "unfitted, it would be refused";
  auto whole = arb->job_put(alice, job);
  ASSERT_FALSE(whole) << "the arbiter refuses it as it is";
  EXPECT_EQ(whole.error().kind, ErrorKind::Invalid);

  ASSERT_TRUE(fit_job_document(job, agent_job_budget()));
  EXPECT_LE(wire::job_document_bytes(job), agent_job_budget());
  const json after = json::parse(job.record);
  const auto& mon = after["metrics"]["gpu_monitoring"];
  // The series is thinner, still evenly spread from the first sample to the last; the statistics over
  // every sample are untouched.
  ASSERT_TRUE(mon.contains("series")) << mon.dump().substr(0, 300);
  EXPECT_EQ(mon["series_thinned_from"], points);
  for (const auto& [index, gpu] : mon["series"].items()) {
    const auto& t = gpu["t"];
    ASSERT_GE(t.size(), 2u);
    EXPECT_LT(t.size(), points);
    EXPECT_EQ(t.front(), series[index]["t"].front());
    EXPECT_EQ(t.back(), series[index]["t"].back());
    EXPECT_EQ(gpu["utilization"].size(), t.size());
  }
  EXPECT_EQ(mon["gpu_stats"], before["metrics"]["gpu_monitoring"]["gpu_stats"]);
  EXPECT_EQ(mon["sample_count"], before["metrics"]["gpu_monitoring"]["sample_count"]);
  EXPECT_EQ(after["command"], before["command"]);

  const core::Job sent = through_the_socket(job);
  auto id = arb->job_put(alice, sent);
  ASSERT_TRUE(id) << id.error().message;
  auto back = arb->job(*id);
  ASSERT_TRUE(back && *back);
  EXPECT_LE(wire::job_json(**back).dump().size(), node::Arbiter::kMaxUserRecordBytes);
}

TEST_F(JobFitTest, ALongCommandLineIsCutAndTheRecordStillFits) {
  std::vector<std::string> argv{"python", "train.py"};
  for (int i = 0; i < 400; ++i) argv.push_back("--override=model.layers." + std::to_string(i) + ".dropout=0.1");
  core::Job job = long_run(argv);
  ASSERT_GT(job.command.size(), node::Arbiter::kMaxUserRecordBytes) << "a command line past the limit on its own";

  ASSERT_TRUE(fit_job_document(job, agent_job_budget()));
  EXPECT_LE(wire::job_document_bytes(job), agent_job_budget());
  const json after = json::parse(job.record);
  EXPECT_EQ(after["command_truncated"], true);
  EXPECT_EQ(after["command"][0], "python");
  EXPECT_EQ(json::parse(job.command), after["command"]) << "the column and the record agree";
  EXPECT_TRUE(after["metrics"]["gpu_monitoring"].contains("series")) << "the command is cut before the series goes";

  auto id = arb->job_put(alice, through_the_socket(job));
  ASSERT_TRUE(id) << id.error().message;
}

TEST_F(JobFitTest, ProfilingStatisticsKeepTheirMeansBeforeTheSeriesGoes) {
  core::Job job = long_run({"python", "train.py"}, true);
  const json before = json::parse(job.record);
  const auto& full = before["metrics"]["gpu_monitoring"]["gpu_stats"]["3"]["profiling"]["tensor_active"];
  ASSERT_TRUE(full.contains("p95")) << full.dump();

  ASSERT_TRUE(fit_job_document(job, agent_job_budget()));
  EXPECT_LE(wire::job_document_bytes(job), agent_job_budget());
  const json after = json::parse(job.record);
  const auto& mon = after["metrics"]["gpu_monitoring"];
  EXPECT_TRUE(mon.contains("profiling_summarised"));
  const auto& profiling = mon["gpu_stats"]["3"]["profiling"];
  EXPECT_NEAR(profiling["tensor_active"].get<double>(), full["mean"].get<double>(), 0.0005);  // the mean, kept
  EXPECT_TRUE(profiling.contains("sm_occupancy"));
  EXPECT_FALSE(profiling.contains("pcie_tx_bytes"));  // throughput goes first
  EXPECT_TRUE(mon.contains("series")) << "the series is thinned, not dropped";
  auto id = arb->job_put(alice, through_the_socket(job));
  ASSERT_TRUE(id) << id.error().message;
}

TEST_F(JobFitTest, ARecordThatFitsIsLeftAsItIs) {
  core::Job job;
  job.id = "abc";
  job.status = "waiting";
  job.command = R"(["sleep","1"])";
  job.record = "{}";
  const core::Job copy = job;
  EXPECT_TRUE(fit_job_document(job, agent_job_budget()));
  EXPECT_EQ(job.record, copy.record);
  EXPECT_EQ(job.command, copy.command);
}

}  // namespace
}  // namespace gf::app
