// One 8-GPU snapshot through each path, side by side: NVML (the fake library, loaded exactly as the
// real one is) vs nvidia-smi (the fake script, run exactly as the real one is), plus the layers above.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <string>

#include "backends/nvidia_smi/nvidia_smi_backend.hpp"
#include "backends/nvml/nvml_backend.hpp"
#include "backends/sim/sim_backend.hpp"
#include "core/stats.hpp"
#include "platform/clock.hpp"
#include "sampler/monitor.hpp"
#include "wire/json.hpp"

#include "gf_test_paths.hpp"

namespace {

using namespace gf;

std::unique_ptr<backends::Backend> nvml8() {
  setenv("FAKE_NVML_SCENARIO", GF_FIXTURES_DIR "/nvml/eight_gpus.json", 1);
  backends::BackendOptions o;
  o.nvml_library = GF_FAKE_NVML;
  auto b = backends::open_nvml(o);
  if (!b) {
    std::fprintf(stderr, "nvml: %s\n", b.error().message.c_str());
    std::exit(1);
  }
  return std::move(*b);
}

void BM_Snapshot8_Nvml(benchmark::State& state) {
  auto b = nvml8();
  for (auto _ : state) benchmark::DoNotOptimize(b->snapshot());
}
BENCHMARK(BM_Snapshot8_Nvml)->Unit(benchmark::kMicrosecond);

// MIG (issue 21): the same 3-GPU A100 node (tests/fixtures/nvml/mig.json) with GPU 0's four MIG instances
// and GPUs 0 and 2 in MIG mode, and with MIG off everywhere: the difference is what enumerating the
// instances costs per collection.
std::unique_ptr<backends::Backend> nvml_scenario(const char* path) {
  setenv("FAKE_NVML_SCENARIO", path, 1);
  backends::BackendOptions o;
  o.nvml_library = GF_FAKE_NVML;
  auto b = backends::open_nvml(o);
  if (!b) {
    std::fprintf(stderr, "nvml: %s\n", b.error().message.c_str());
    std::exit(1);
  }
  return std::move(*b);
}

void BM_Snapshot3_NvmlMig(benchmark::State& state) {
  auto b = nvml_scenario(GF_FIXTURES_DIR "/nvml/mig.json");
  for (auto _ : state) benchmark::DoNotOptimize(b->snapshot());
}
BENCHMARK(BM_Snapshot3_NvmlMig)->Unit(benchmark::kMicrosecond);

void BM_Snapshot3_NvmlMigOff(benchmark::State& state) {
  // mig.json with MIG off: its "mig_mode": 1 lines set to 0 (the instances are then never asked for).
  std::FILE* in = std::fopen(GF_FIXTURES_DIR "/nvml/mig.json", "rb");
  std::string text;
  for (int c; in && (c = std::fgetc(in)) != EOF;) text.push_back(static_cast<char>(c));
  if (in) std::fclose(in);
  for (auto at = text.find("\"mig_mode\": 1"); at != std::string::npos; at = text.find("\"mig_mode\": 1"))
    text.replace(at, 13, "\"mig_mode\": 0");
  const std::string path = "/tmp/gf-bench-mig-off.json";
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out) {
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  }
  auto b = nvml_scenario(path.c_str());
  for (auto _ : state) benchmark::DoNotOptimize(b->snapshot());
  std::remove(path.c_str());
}
BENCHMARK(BM_Snapshot3_NvmlMigOff)->Unit(benchmark::kMicrosecond);

void BM_Snapshot1_NvidiaSmiMig(benchmark::State& state) {
  setenv("FAKE_NVIDIA_SMI_MODE", "mig", 1);  // -L and -q -x on top of the two queries
  backends::BackendOptions o;
  o.nvidia_smi = GF_FAKES_DIR "/fake-nvidia-smi";
  auto b = backends::open_nvidia_smi(o);
  if (!b) {
    state.SkipWithError(b.error().message.c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*b)->snapshot());
  unsetenv("FAKE_NVIDIA_SMI_MODE");
}
BENCHMARK(BM_Snapshot1_NvidiaSmiMig)->Unit(benchmark::kMillisecond);

void BM_Snapshot8_NvidiaSmi(benchmark::State& state) {
  unsetenv("FAKE_NVIDIA_SMI_MODE");
  backends::BackendOptions o;
  o.nvidia_smi = GF_FAKES_DIR "/fake-nvidia-smi";
  auto b = backends::open_nvidia_smi(o);
  if (!b) {
    state.SkipWithError(b.error().message.c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*b)->snapshot());
}
BENCHMARK(BM_Snapshot8_NvidiaSmi)->Unit(benchmark::kMillisecond);

// The Monitor on top of NVML: /proc resolution, scoring, memory attribution, no cache.
void BM_Snapshot8_MonitorFresh(benchmark::State& state) {
  sampler::Monitor m(nvml8(), platform::system_clock(), sampler::MonitorOptions{});
  for (auto _ : state) benchmark::DoNotOptimize(m.snapshot(false));
}
BENCHMARK(BM_Snapshot8_MonitorFresh)->Unit(benchmark::kMicrosecond);

void BM_Snapshot8_MonitorCached(benchmark::State& state) {
  sampler::Monitor m(nvml8(), platform::system_clock(), sampler::MonitorOptions{});
  (void)m.snapshot(false);
  for (auto _ : state) benchmark::DoNotOptimize(m.snapshot(true));
}
BENCHMARK(BM_Snapshot8_MonitorCached)->Unit(benchmark::kNanosecond);

void BM_Snapshot8_ToJson(benchmark::State& state) {
  auto b = nvml8();
  auto s = b->snapshot();
  for (auto _ : state) benchmark::DoNotOptimize(wire::snapshot_json(*s).dump());
}
BENCHMARK(BM_Snapshot8_ToJson)->Unit(benchmark::kMicrosecond);

void BM_Aggregate8(benchmark::State& state) {
  auto b = nvml8();
  auto s = b->snapshot();
  core::RunAggregator agg;
  auto t = std::chrono::steady_clock::time_point{};
  for (auto _ : state) {
    agg.add(*s, t);
    t += std::chrono::milliseconds(100);
  }
}
BENCHMARK(BM_Aggregate8)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
