// Profiling per MIG instance in the encoders: each instance's JSON object has the rows of core::kMigFields
// at the GPU document's keys, and /metrics adds one DCGM_FI_PROF_* sample per instance with GPU_I_PROFILE
// and GPU_I_ID (and none for an instance whose value is absent), beside the GPU's own.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/fields.hpp"
#include "wire/json.hpp"
#include "wire/prometheus.hpp"

namespace gf::wire::mig_profiling_wire_test {
namespace {

core::GpuReading mig_h100() {
  core::GpuReading g;
  g.uuid = "GPU-1";
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = "00000000:05:00.0";
  g.mig_enabled = true;
  g.prof_tensor_active = core::Reading<double>::absent(core::Absent::MigEnabled);
  core::MigInstance a;
  a.profile = "3g.40gb";
  a.gpu_instance_id = 2;
  a.memory_used_mib = std::uint64_t{15000};
  a.prof_tensor_active = 0.60004;
  a.prof_pcie_rx_bytes = 200.0 * 1048576;
  core::MigInstance b;
  b.profile = "1g.10gb";
  b.gpu_instance_id = 10;
  b.prof_tensor_active = core::Reading<double>::absent(core::Absent::NotSupported);
  b.profiling_note = "the driver does not take a GPM sample for GPU instance 10";
  g.mig_instances = {a, b};
  return g;
}

TEST(MigProfilingWire, EachInstanceObjectHasItsProfilingAtTheGpuKeys) {
  auto j = gpu_json(mig_h100());
  auto a = j["mig_instances"][0];
  EXPECT_EQ(a["profiling"]["tensor_active"], 0.6);  // 4 decimals, as the GPU's
  EXPECT_EQ(a["profiling"]["pcie_rx_bytes"], 200.0 * 1048576);
  EXPECT_EQ(a["memory"]["used"], 15000);
  EXPECT_TRUE(a["profiling_note"].is_null());
  auto b = j["mig_instances"][1];
  EXPECT_TRUE(b["profiling"]["tensor_active"].is_null());
  EXPECT_EQ(b["missing_reasons"]["profiling.tensor_active"], "not_supported");
  EXPECT_EQ(b["profiling_note"], "the driver does not take a GPM sample for GPU instance 10");
  // Every per-instance field is a row of the field table, at that row's key.
  for (const auto& mf : core::kMigFields) {
    std::string key(core::info(mf.id).json_key);
    const auto dot = key.find('.');
    ASSERT_NE(dot, std::string::npos) << key;
    EXPECT_TRUE(b[key.substr(0, dot)].contains(key.substr(dot + 1))) << key;
  }
}

// The value of the sample whose name and labels are `series` ("NAME{labels}"); NaN when there is none.
double value_of(const std::string& text, const std::string& series) {
  const auto at = text.find(series + " ");
  if (at == std::string::npos) return std::nan("");
  return std::stod(text.substr(at + series.size() + 1, text.find('\n', at) - at - series.size() - 1));
}

TEST(MigProfilingWire, MetricsHaveOneProfilingSamplePerInstance) {
  core::Snapshot s;
  s.backend = "nvml";
  s.gpus = {mig_h100()};
  std::string out;
  write_prometheus_gpus(out, s, "n1");
  const std::string gpu =
      R"(gpu="0",UUID="GPU-1",pci_bus_id="00000000:05:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3")";
  const std::string gi2 = gpu + R"(,GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="n1"})";
  EXPECT_EQ(value_of(out, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" + gi2), 0.60004) << out;
  EXPECT_EQ(value_of(out, "DCGM_FI_PROF_PCIE_RX_BYTES{" + gi2), 200.0 * 1048576);
  EXPECT_EQ(value_of(out, "DCGM_FI_DEV_FB_USED{" + gi2), 15000);
  // Absent values have no sample: the whole GPU's (MIG) and instance 10's.
  EXPECT_EQ(out.find("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" + gpu + R"(,Hostname)"), std::string::npos);
  EXPECT_EQ(out.find(R"(GPU_I_ID="10")"), std::string::npos);
  // The total stays per GPU (never per instance: a sum over the labels would count it twice).
  EXPECT_EQ(out.find(R"(gpufleet_gpu_memory_total_mib{)" + gpu + ",GPU_I"), std::string::npos);
  // One HELP line per family, however many instances.
  const std::string help = "# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE ";
  const auto first = out.find(help);
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(out.find(help, first + 1), std::string::npos);
}

}  // namespace
}  // namespace gf::wire::mig_profiling_wire_test
