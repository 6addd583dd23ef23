// wire/gzip: whole members, and members made of a part deflated once and a tail added per request,
// read back with zlib's own inflate (wire::gunzip).
#include "wire/gzip.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gf::wire {
namespace {

std::string sample_text(std::size_t lines, const std::string& name) {
  std::string s;
  for (std::size_t i = 0; i < lines; ++i)
    s += name + "{gpu=\"" + std::to_string(i % 8) + "\",UUID=\"GPU-" + std::to_string(i * 7919) + "\"} " +
         std::to_string(i * 31 % 101) + "\n";
  return s;
}

TEST(Gzip, WholeMemberReadsBack) {
  const auto text = sample_text(500, "DCGM_FI_DEV_GPU_UTIL");
  const auto gz = gzip(text);
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), text.size() / 4);  // repetitive text compresses
  EXPECT_EQ(gunzip(gz), text);
}

TEST(Gzip, EmptyTextIsAValidMember) {
  const auto gz = gzip("");
  EXPECT_EQ(gunzip(gz), "");
  EXPECT_FALSE(gz.empty());
}

TEST(Gzip, HeadAndTailReadAsOneMember) {
  const auto gpus = sample_text(400, "DCGM_FI_DEV_FB_USED");
  const auto head = gzip_head(gpus);
  EXPECT_EQ(head.size, gpus.size());
  for (const std::string& tail : {std::string(), std::string("gpufleet_agent_uptime_seconds 12.5\n"),
                                  sample_text(60, "gpufleet_user_gpu_held_seconds_total")}) {
    const auto whole = head.bytes + gzip_tail(head, tail);
    EXPECT_EQ(gunzip(whole), gpus + tail) << "tail of " << tail.size() << " bytes";
  }
}

TEST(Gzip, TailLargerThanAStoredBlockAndEmptyHead) {
  const auto head = gzip_head("");
  const auto tail = sample_text(3000, "x");  // > 64 KiB
  ASSERT_GT(tail.size(), 65535u);
  EXPECT_EQ(gunzip(head.bytes + gzip_tail(head, tail)), tail);
}

TEST(Gzip, OneHeadServesManyTails) {
  const auto head = gzip_head(sample_text(50, "a"));
  const auto one = head.bytes + gzip_tail(head, "b 1\n");
  const auto two = head.bytes + gzip_tail(head, "b 2\n");
  EXPECT_EQ(gunzip(one), sample_text(50, "a") + "b 1\n");
  EXPECT_EQ(gunzip(two), sample_text(50, "a") + "b 2\n");
}

TEST(Gzip, GunzipRefusesDamage) {
  const auto text = sample_text(100, "y");
  auto gz = gzip(text);
  EXPECT_EQ(gunzip(gz.substr(0, gz.size() - 3)), "");               // truncated trailer
  gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0x55);  // the CRC no longer matches
  EXPECT_EQ(gunzip(gz), "");
  EXPECT_EQ(gunzip("not gzip at all"), "");
  EXPECT_EQ(gunzip(gzip(text), 100), "");  // beyond max_size
}

}  // namespace
}  // namespace gf::wire
