// nvidia-smi's MIG answers, parsed from recordings of real machines: `nvidia-smi -L` of A100s in MIG
// mode (driver 535 with seven 1g.10gb devices, 530 with two 3g.40gb, a node of four GPUs with MIG on one
// only) and `nvidia-smi -q -x` of an A100-SXM4-40GB in MIG mode (driver 510). See the fixtures' README.
#include "backends/nvidia_smi/mig_text.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gf_test_paths.hpp"

namespace gf::backends::nvidia_smi {
namespace {

using ::testing::HasSubstr;

std::string mig_fixture(const std::string& name) {
  std::ifstream in(std::string(GF_FIXTURES_DIR) + "/nvidia_smi/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MigList, SevenDevicesOfOneGpu) {
  auto l = parse_list(mig_fixture("L-a100-sxm4-80gb-7x1g10gb-535.txt"));
  ASSERT_TRUE(l) << l.error().message;
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].uuid, "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16");
  ASSERT_EQ((*l)[0].migs.size(), 7u);
  EXPECT_EQ((*l)[0].migs[6].profile, "1g.10gb");
  EXPECT_EQ((*l)[0].migs[6].device, 6u);
  EXPECT_EQ((*l)[0].migs[6].uuid, "MIG-1aae4990-b962-574e-8375-119d6d9b9687");
  EXPECT_FALSE((*l)[0].migs[6].gpu_instance_id.has_value());  // the current form carries no ids
}

TEST(MigList, MigOnOneGpuOfFour) {
  auto l = parse_list(mig_fixture("L-a100-sxm4-80gb-mixed.txt"));
  ASSERT_TRUE(l) << l.error().message;
  ASSERT_EQ(l->size(), 4u);
  EXPECT_EQ((*l)[0].migs.size(), 4u);
  EXPECT_EQ((*l)[0].migs[3].profile, "1g.20gb");
  EXPECT_TRUE((*l)[1].migs.empty());
  EXPECT_EQ((*l)[3].index, 3u);
  EXPECT_EQ((*l)[3].uuid, "GPU-69ec2344-ebac-b028-f88f-452abb3d7f11");
  auto p = parse_list(mig_fixture("L-a100-80gb-pcie-2x3g40gb-530.txt"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)[0].migs[1].profile, "3g.40gb");
}

TEST(MigList, OldDriversNameTheIdsInTheUuid) {
  // The pre-R470 form of a device line (the UUID form nvidia-container-toolkit issue #203 quotes).
  auto l = parse_list(
      "GPU 0: NVIDIA A100 80GB PCIe (UUID: GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39)\n"
      "  MIG 3g.40gb Device 0: (UUID: MIG-GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39/1/0)\n");
  ASSERT_TRUE(l) << l.error().message;
  ASSERT_EQ((*l)[0].migs.size(), 1u);
  EXPECT_EQ((*l)[0].migs[0].gpu_instance_id, 1u);
  EXPECT_EQ((*l)[0].migs[0].compute_instance_id, 0u);
}

TEST(MigList, BadLinesAreOneClearError) {
  EXPECT_THAT(parse_list("  MIG 1g.10gb Device 0: (UUID: MIG-x)\n").error().message, HasSubstr("MIG line"));
  EXPECT_THAT(parse_list("GPU x: nothing\n").error().message, HasSubstr("GPU line"));
  EXPECT_THAT(parse_list("GPU 0: A (UUID: GPU-1)\n  MIG 1g.10gb Device z: (UUID: MIG-x)\n").error().message,
              HasSubstr("MIG line"));
  auto notice = parse_list("No devices found.\n");
  ASSERT_TRUE(notice);
  EXPECT_TRUE(notice->empty());
  std::string many = "GPU 0: A (UUID: GPU-1)\n";
  for (int i = 0; i < 40; ++i)
    many += "  MIG 1g.5gb Device " + std::to_string(i) + ": (UUID: MIG-" + std::to_string(i) + ")\n";
  EXPECT_THAT(parse_list(many).error().message, HasSubstr("more MIG devices"));
}

TEST(MigXml, TheRecordedA100) {
  auto x = parse_query_xml(mig_fixture("q-x-a100-sxm4-40gb-mig-510.xml"));
  ASSERT_TRUE(x) << x.error().message;
  ASSERT_EQ(x->size(), 1u);
  const auto& g = (*x)[0];
  EXPECT_EQ(g.uuid, "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a");
  ASSERT_EQ(g.migs.size(), 2u);
  EXPECT_EQ(g.migs[1].index, 1u);
  EXPECT_EQ(g.migs[1].gpu_instance_id, 2u);
  EXPECT_EQ(g.migs[1].compute_instance_id, 0u);
  EXPECT_EQ(g.migs[1].memory_total_mib, core::Reading<std::uint64_t>(19968));
  EXPECT_EQ(g.migs[1].memory_used_mib, core::Reading<std::uint64_t>(19));
  EXPECT_EQ(g.migs[1].memory_free_mib, core::Reading<std::uint64_t>(19948));
  EXPECT_TRUE(g.processes.empty());
}

TEST(MigXml, ProcessesCarryTheirInstanceIds) {
  auto x = parse_query_xml(R"(<?xml version="1.0" ?><nvidia_smi_log><gpu id="00000000:07:00.0">
      <uuid>GPU-1</uuid><processes>
        <process_info><gpu_instance_id>9</gpu_instance_id><compute_instance_id>0</compute_instance_id>
          <pid>5002</pid><type>C</type><process_name>python</process_name><used_memory>2000 MiB</used_memory></process_info>
        <process_info><gpu_instance_id>N/A</gpu_instance_id><compute_instance_id>N/A</compute_instance_id>
          <pid>77</pid></process_info>
      </processes><empty/></gpu></nvidia_smi_log>)");
  ASSERT_TRUE(x) << x.error().message;
  ASSERT_EQ((*x)[0].processes.size(), 2u);
  EXPECT_EQ((*x)[0].processes[0].pid, 5002u);
  EXPECT_EQ((*x)[0].processes[0].gpu_instance_id, 9u);
  EXPECT_FALSE((*x)[0].processes[1].gpu_instance_id.has_value());
}

TEST(MigXml, NotItsXmlIsAnError) {
  EXPECT_FALSE(parse_query_xml(""));
  EXPECT_FALSE(parse_query_xml("<html><body>x</body></html>"));
  EXPECT_THAT(parse_query_xml("<nvidia_smi_log><gpu></nvidia_smi_log>").error().message, HasSubstr("unexpected"));
  EXPECT_THAT(parse_query_xml("<nvidia_smi_log><gpu>").error().message, HasSubstr("ends inside"));
  EXPECT_THAT(parse_query_xml("<nvidia_smi_log><gpu").error().message, HasSubstr("not closed"));
  std::string deep = "<nvidia_smi_log>";
  for (int i = 0; i < 40; ++i) deep += "<a>";
  EXPECT_THAT(parse_query_xml(deep).error().message, HasSubstr("too deep"));
}

TEST(MigJoin, ListAndXmlMakeInstancesAndNeverTouchTheGpuMemory) {
  auto l = parse_list(
      "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-27b94a00-ed54-5c24-b1fd-1054085de32a)\n"
      "  MIG 3g.20gb     Device  0: (UUID: MIG-aaaa)\n"
      "  MIG 3g.20gb     Device  1: (UUID: MIG-bbbb)\n"
      "  MIG 1g.5gb      Device  2: (UUID: MIG-cccc)\n");
  auto x = parse_query_xml(mig_fixture("q-x-a100-sxm4-40gb-mig-510.xml"));
  ASSERT_TRUE(l && x);
  std::vector<core::GpuReading> gpus(2);
  gpus[0].uuid = "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a";
  gpus[0].name = "NVIDIA A100-SXM4-40GB";
  gpus[0].mig_enabled = true;
  gpus[0].memory_used_mib = std::uint64_t{38};
  gpus[1].uuid = "GPU-other";
  gpus[1].mig_enabled = false;
  const auto problems = add_mig_instances(gpus, *l, *x);
  ASSERT_EQ(gpus[0].mig_instances.size(), 2u);
  EXPECT_EQ(gpus[0].mig_instances[0].uuid, "MIG-aaaa");
  EXPECT_EQ(gpus[0].mig_instances[0].gpu_instance_id, 1u);
  EXPECT_EQ(gpus[0].mig_instances[1].gpu_instance_id, 2u);
  EXPECT_EQ(gpus[0].memory_used_mib, core::Reading<std::uint64_t>(38));
  ASSERT_EQ(problems.size(), 1u);  // device 2 is not in the XML: its ids are unknown, it is left out
  EXPECT_THAT(problems[0], HasSubstr("MIG device 2 (MIG-cccc)"));
  EXPECT_TRUE(gpus[1].mig_instances.empty());
}

TEST(MigJoin, ProcessesGetTheirInstanceIdsFromTheXmlByPid) {
  auto l = parse_list("GPU 0: A (UUID: GPU-1)\n  MIG 1g.10gb Device  0: (UUID: MIG-x)\n");
  auto x = parse_query_xml(R"(<nvidia_smi_log><gpu><uuid>GPU-1</uuid><mig_devices><mig_device><index>0</index>
      <gpu_instance_id>9</gpu_instance_id><compute_instance_id>0</compute_instance_id>
      <fb_memory_usage><total>9728 MiB</total><used>2013 MiB</used><free>7715 MiB</free></fb_memory_usage>
      </mig_device></mig_devices><processes><process_info><gpu_instance_id>9</gpu_instance_id>
      <compute_instance_id>0</compute_instance_id><pid>5002</pid></process_info></processes></gpu></nvidia_smi_log>)");
  ASSERT_TRUE(l && x);
  std::vector<core::GpuReading> gpus(1);
  gpus[0].uuid = "GPU-1";
  gpus[0].mig_enabled = true;
  gpus[0].processes.resize(2);
  gpus[0].processes[0].pid = 5002;
  gpus[0].processes[1].pid = 77;
  EXPECT_TRUE(add_mig_instances(gpus, *l, *x).empty());
  ASSERT_EQ(gpus[0].mig_instances.size(), 1u);
  EXPECT_EQ(gpus[0].mig_instances[0].memory_free_mib, core::Reading<std::uint64_t>(7715));
  EXPECT_EQ(gpus[0].processes[0].gpu_instance_id, 9u);
  EXPECT_EQ(gpus[0].processes[0].compute_instance_id, 0u);
  EXPECT_FALSE(gpus[0].processes[1].gpu_instance_id.has_value());  // the driver does not say
}

}  // namespace
}  // namespace gf::backends::nvidia_smi
