// The kernel log reader on a plain file someone appends to (the stand-in for /dev/kmsg in tests):
// it starts at the end, never blocks, cuts long lines, keeps a line split across two writes whole.
#include "platform/kmsg.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace gf::platform {
namespace {

void append_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

std::vector<std::string> poll_lines(KmsgReader& r) {
  std::vector<std::string> lines;
  r.poll([&](std::string_view l) { lines.emplace_back(l); });
  return lines;
}

TEST(KmsgReader, OnlyWhatIsLoggedAfterOpen) {
  test::TempDir dir;
  const std::string path = (dir.path() / "kmsg").string();
  append_text(path, "NVRM: Xid (PCI:0000:65:00): 79, before we started\n");
  auto r = KmsgReader::open(path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(poll_lines(*r).empty());
  append_text(path, "first\nsecond half");
  EXPECT_EQ(poll_lines(*r), (std::vector<std::string>{"first"}));
  append_text(path, " ends here\n");
  EXPECT_EQ(poll_lines(*r), (std::vector<std::string>{"second half ends here"}));
  EXPECT_TRUE(poll_lines(*r).empty());  // nothing new: returns at once
}

TEST(KmsgReader, ALongLineIsCutNotKept) {
  test::TempDir dir;
  const std::string path = (dir.path() / "kmsg").string();
  append_text(path, "");
  auto r = KmsgReader::open(path);
  ASSERT_TRUE(r);
  append_text(path, std::string(3 * KmsgReader::kMaxLine, 'x') + "\nnext\n");
  const auto lines = poll_lines(*r);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].size(), KmsgReader::kMaxLine);
  EXPECT_EQ(lines[1], "next");
}

TEST(KmsgReader, MissingAndUnreadableSayWhich) {
  test::TempDir dir;
  auto missing = KmsgReader::open((dir.path() / "nope").string());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::NotFound);
  if (::geteuid() != 0) {  // root reads a 0000 file anyway
    const std::string path = (dir.path() / "closed").string();
    append_text(path, "x\n");
    ::chmod(path.c_str(), 0);
    auto closed = KmsgReader::open(path);
    ASSERT_FALSE(closed);
    EXPECT_EQ(closed.error().kind, ErrorKind::Permission);
  }
}

TEST(KmsgReader, TheRealDeviceNeverBlocks) {
  // /dev/kmsg where this machine lets us read it: a poll right after open returns (it starts at the
  // end), whatever the kernel logs meanwhile. Elsewhere the open fails cleanly.
  auto r = KmsgReader::open("/dev/kmsg");
  if (!r) {
    EXPECT_NE(r.error().kind, ErrorKind::Failed) << r.error().message;
    GTEST_SKIP() << r.error().message;
  }
  const std::size_t n = r->poll([](std::string_view line) { EXPECT_LE(line.size(), KmsgReader::kMaxLine); });
  EXPECT_LT(n, 100000u);
}

}  // namespace
}  // namespace gf::platform
