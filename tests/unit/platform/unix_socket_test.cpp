// UnixLineSocket over a socketpair: whole lines, split and joined writes, the line limit, a closed peer,
// a silent peer (the deadline is what ends the wait), and connecting to nothing.
#include "platform/unix_socket.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace {

using gf::platform::UnixLineSocket;
using namespace std::chrono_literals;

struct Pair {
  UnixLineSocket a;
  int b = -1;
  Pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0) {
      a = UnixLineSocket(fds[0]);
      b = fds[1];
    }
  }
  ~Pair() {
    if (b >= 0) ::close(b);
  }
  void put(const std::string& s) const { ASSERT_EQ(::write(b, s.data(), s.size()), static_cast<ssize_t>(s.size())); }
};

auto soon() { return UnixLineSocket::Clock::now() + 2s; }

TEST(UnixLineSocket, SplitsAndJoinsLines) {
  Pair p;
  ASSERT_GE(p.b, 0);
  p.put("one\ntw");
  auto l1 = p.a.read_line(soon(), 100);
  ASSERT_TRUE(l1);
  EXPECT_EQ(*l1, "one");
  EXPECT_FALSE(p.a.line_buffered());
  p.put("o\nthree\n");
  EXPECT_EQ(p.a.read_line(soon(), 100).value(), "two");
  EXPECT_TRUE(p.a.line_buffered());
  EXPECT_EQ(p.a.read_line(soon(), 100).value(), "three");
}

TEST(UnixLineSocket, LineOverTheLimitIsAnError) {
  Pair p;
  ASSERT_GE(p.b, 0);
  p.put(std::string(200, 'x'));  // no newline yet: the buffer alone is over the limit
  auto l = p.a.read_line(soon(), 100);
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message.find("longer than 100"), std::string::npos);
}

TEST(UnixLineSocket, SilentPeerEndsAtTheDeadlineAsUnavailable) {
  Pair p;
  ASSERT_GE(p.b, 0);
  p.put("partial");
  auto l = p.a.read_line(UnixLineSocket::Clock::now() + 50ms, 100);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().kind, gf::ErrorKind::Unavailable);
}

TEST(UnixLineSocket, ClosedPeerIsFailed) {
  Pair p;
  ASSERT_GE(p.b, 0);
  ::close(p.b);
  p.b = -1;
  auto l = p.a.read_line(soon(), 100);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().kind, gf::ErrorKind::Failed);
  EXPECT_FALSE(p.a.write_all("x\n", soon()));
}

TEST(UnixLineSocket, ConnectToNothingSaysWhy) {
  auto c = UnixLineSocket::connect("/nonexistent-dir/agent.sock", 100ms);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, gf::ErrorKind::NotFound);
  auto t = UnixLineSocket::connect(std::string(200, 'a'), 100ms);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, gf::ErrorKind::Invalid);
}

}  // namespace
