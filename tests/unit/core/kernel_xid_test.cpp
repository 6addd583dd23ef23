// XID lines as the NVIDIA kernel module logs them, and the per-GPU record the verdict reads.
#include "core/kernel_xid.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/gpu_health.hpp"

namespace gf::core {
namespace {

using namespace std::chrono_literals;

TEST(KernelXidLine, TheFormsTheDriverWrites) {
  // A /dev/kmsg record's message, with its header left on.
  auto a = parse_kernel_xid(
      "4,1234,5678901,-;NVRM: Xid (PCI:0000:65:00): 79, pid=0, name=python3, GPU has fallen off the bus.");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->gpu, (PciAddress{0, 0x65, 0}));
  EXPECT_EQ(a->xid, 79u);
  EXPECT_EQ(a->detail, ", pid=0, name=python3, GPU has fallen off the bus.");
  // dmesg's form, older drivers without "PCI:", upper-case hex and a function.
  auto b = parse_kernel_xid("[ 1234.5678] NVRM: Xid (0000:3B:00.0): 13, Graphics Exception");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gpu, (PciAddress{0, 0x3b, 0}));
  EXPECT_EQ(b->xid, 13u);
  auto c = parse_kernel_xid("NVRM: Xid (PCI:0001:c1:1f): 119, pid=2, Timeout waiting for RPC from GSP!");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->gpu, (PciAddress{1, 0xc1, 0x1f}));
  EXPECT_EQ(c->xid, 119u);
}

TEST(KernelXidLine, EverythingElseIsNoXid) {
  for (const char* line :
       {"", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.159.04", "NVRM: Xid (PCI:0000:65:00): , no number",
        "NVRM: Xid (PCI:0000:65:00) 79, no colon", "NVRM: Xid (PCI:0000:65): 79", "NVRM: Xid (PCI:zzzz:65:00): 79",
        "NVRM: Xid (PCI:0000:65:00): 0, zero", "NVRM: Xid (PCI:0000:65:00): 9999999, too big",
        "NVRM: Xid (PCI:0000:65:00.9): 79", "NVRM: Xid (PCI:0000:65:20): 79", "NVRM: Xid (PCI:0000:65:00",
        "user text: NVRM: Xid (PCI:0000:6", "NVRM: Xid (PCI:000000000000000000000:65:00): 79"}) {
    EXPECT_FALSE(parse_kernel_xid(line)) << line;
  }
}

TEST(KernelXidLine, PciAddressesOfEveryTool) {
  EXPECT_EQ(parse_pci_address("00000000:65:00.0"), (PciAddress{0, 0x65, 0}));  // nvidia-smi, NVML
  EXPECT_EQ(parse_pci_address("0000:65:00"), (PciAddress{0, 0x65, 0}));        // the kernel log
  EXPECT_FALSE(parse_pci_address(""));
  EXPECT_FALSE(parse_pci_address("[N/A]"));
  EXPECT_FALSE(parse_pci_address("000000000:65:00.0"));  // nine digits of domain
}

TEST(KernelXids, TheVerdictSeesACriticalXidOfItsGpuOnly) {
  KernelXids log;
  const auto t = std::chrono::system_clock::time_point{1700000000s};
  ASSERT_TRUE(log.record(*parse_kernel_xid("NVRM: Xid (PCI:0000:65:00): 79, pid=0, GPU has fallen off the bus."), t));
  GpuReading hit;
  hit.index = 2;
  hit.pci_bus_id = "00000000:65:00.0";
  log.fill(hit);
  EXPECT_EQ(hit.last_xid, Reading<unsigned>(79));
  ASSERT_EQ(hit.recent_xids.size(), 1u);
  EXPECT_EQ(hit.recent_xids[0].time, t);
  const auto v = judge_health(hit);
  EXPECT_FALSE(v.healthy);
  EXPECT_EQ(v.summary, "unhealthy: XID 79 (GPU has fallen off the bus)");

  GpuReading other;
  other.pci_bus_id = "00000000:66:00.0";
  log.fill(other);
  EXPECT_EQ(other.last_xid, Reading<unsigned>(0));
  EXPECT_TRUE(judge_health(other).healthy);

  GpuReading unknown;  // no address to match on: absent, never a made-up 0
  unknown.pci_bus_id = "[N/A]";
  log.fill(unknown);
  EXPECT_EQ(unknown.last_xid.why(), Absent::Error);
}

TEST(KernelXids, BoundedWithCriticalXidsEvictedLast) {
  KernelXids log(4);
  const auto t = std::chrono::system_clock::time_point{};
  KernelXid x{{0, 0x65, 0}, 48, {}};
  ASSERT_TRUE(log.record(x, t));
  for (int i = 0; i < 20; ++i) {
    x.xid = 13;
    ASSERT_TRUE(log.record(x, t));
  }
  GpuReading g;
  g.pci_bus_id = "00000000:65:00.0";
  log.fill(g);
  ASSERT_EQ(g.recent_xids.size(), 4u);
  EXPECT_EQ(g.recent_xids[0].xid, 48u);  // still there after 20 application faults
  EXPECT_EQ(g.last_xid, Reading<unsigned>(13));
  EXPECT_FALSE(judge_health(g).healthy);

  KernelXids many;
  for (unsigned i = 0; i < KernelXids::kMaxGpus; ++i) ASSERT_TRUE(many.record({{i, 1, 0}, 13, {}}, t));
  EXPECT_FALSE(many.record({{9999, 1, 0}, 79, {}}, t));  // more addresses than GPUs: dropped
}

}  // namespace
}  // namespace gf::core
