// `gpufleet serve` and hostile permessage-deflate clients on /ws (server/ws_link.cpp runs their frames):
// a client that never reads and then resets while writes wait, one that pings without reading, and one
// that streams frames without end. Each through a raw socket (tests/integration/serve_client.hpp).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "integration/serve_fixture.hpp"

namespace gf::serve_test {
namespace {

const std::vector<std::string> kOfferDeflate{"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"};

// A masked client frame (mask 0: the payload as is).
std::string masked_frame(unsigned first_byte, const std::string& payload) {
  std::string f{static_cast<char>(first_byte)};
  const std::size_t n = payload.size();
  if (n < 126) {
    f += static_cast<char>(0x80 | n);
  } else {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  }
  f += std::string(4, '\0');
  return f + payload;
}

// A deflate client of /ws whose TCP window stays small, with its writes stuck: `requests` full updates
// asked for and never read (the agent's queue takes them all: websocket.queue in the config).
WsConn stuck_deflate_client(unsigned short port, int requests) {
  WsConn c(port, "/ws?period_ms=100", std::nullopt, 4096, kOfferDeflate);
  std::string burst;
  for (int i = 0; i < requests; ++i) burst += masked_frame(0x81, R"({"event":"request_gpu_update"})");
  c.sock().send_all(burst);
  return c;
}

// The server's frames on a raw socket: counts the text frames and the pongs (keeping the last pong's
// payload), and the frames no server sends (a corrupt stream).
struct FrameCount {
  int texts = 0, pongs = 0, bad = 0;
  std::string last_pong;
  // Reads until `done` holds (true), a bad frame, or the deadline.
  template <class Done>
  bool read_until(Sock& s, Done done, Clock::time_point deadline) {
    std::size_t at = 0;  // frames consumed in s.buf, erased once per read
    for (;;) {
      for (;;) {
        const std::string_view b = std::string_view(s.buf).substr(at);
        if (b.size() < 2) break;
        const auto u = [&](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(b[i])); };
        std::uint64_t len = u(1) & 0x7f;
        std::size_t head = 2;
        if (len == 126) {
          if (b.size() < 4) break;
          len = (u(2) << 8) | u(3);
          head = 4;
        } else if (len == 127) {
          if (b.size() < 10) break;
          len = 0;
          for (std::size_t i = 2; i < 10; ++i) len = (len << 8) | u(i);
          head = 10;
        }
        // Only whole text frames (deflated or not) and pongs come here; nothing masked, nothing huge.
        const bool text = u(0) == 0x81 || u(0) == 0xc1, pong = u(0) == 0x8a;
        if ((!text && !pong) || (u(1) & 0x80) != 0 || len > (64u << 20)) {
          ++bad;
          return false;
        }
        if (b.size() < head + len) break;
        if (text) ++texts;
        if (pong) {
          ++pongs;
          last_pong = std::string(b.substr(head, len));
        }
        at += head + len;
        if (done(*this)) return true;
      }
      s.buf.erase(0, at);
      at = 0;
      if (s.fill(deadline) != Sock::Got::Data) return false;
    }
  }
};

constexpr const char* kPatientQueue = R"({"websocket": {"stall_timeout_s": 120, "queue": 10000}})";

// A write that fails (the peer reset the connection while the agent's writes waited) once crashed the
// agent: the write's handler emptied its queue (abort) and then took the written items off it.
TEST_F(Serve, ADeflateClientThatResetsWhileWritesWaitLeavesTheAgentRunning) {
  unsetenv("GPUFLEET_SIM_SCENARIO");
  const auto cfg = write_file("agent.json", kPatientQueue);
  ASSERT_TRUE(start("sim", {"--sim-gpus", "64", "--interval", "0.2", "--config", cfg}));
  for (int round = 0; round < 3; ++round) {
    std::vector<WsConn> clients;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(stuck_deflate_client(port(), 3000));
      ASSERT_TRUE(clients.back().open()) << clients.back().handshake.raw_head;
      ASSERT_NE(clients.back().handshake.header("sec-websocket-extensions").find("permessage-deflate"),
                std::string::npos);
    }
    std::this_thread::sleep_for(1500ms);  // the updates fill the buffers; the agent's writes wait
    for (auto& c : clients) {
      const linger reset{1, 0};  // close sends a reset
      ::setsockopt(c.sock().fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
      c.sock().close();
    }
    std::this_thread::sleep_for(300ms);
    expect_healthy(port(), "deflate clients that reset while writes waited");
  }
  WsConn after(port(), "/ws", std::nullopt, 0, kOfferDeflate);
  ASSERT_TRUE(after.open()) << after.handshake.raw_head;
  expect_clean_stop();
}

// A client that pings and never reads: the agent holds one pong for it (the latest ping's), not one per
// ping, and answers the last ping once the client reads again.
TEST_F(Serve, ADeflateClientThatPingsWithoutReadingGetsOnlyTheLatestPong) {
  unsetenv("GPUFLEET_SIM_SCENARIO");
  const auto cfg = write_file("agent.json", kPatientQueue);
  ASSERT_TRUE(start("sim", {"--sim-gpus", "64", "--interval", "0.2", "--config", cfg}));
  WsConn c = stuck_deflate_client(port(), 3000);
  ASSERT_TRUE(c.open()) << c.handshake.raw_head;
  std::this_thread::sleep_for(1500ms);  // the agent's writes wait
  std::string pings;
  constexpr int kPings = 20000;
  for (int i = 0; i < kPings; ++i) pings += masked_frame(0x89, "ping " + std::to_string(i));
  pings += masked_frame(0x89, "last");
  ASSERT_TRUE(c.sock().send_all(pings));
  std::this_thread::sleep_for(500ms);
  const int big = 4 << 20;  // reads the backlog faster
  ::setsockopt(c.sock().fd(), SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  FrameCount count;
  ASSERT_TRUE(count.read_until(
      c.sock(), [](const FrameCount& n) { return n.last_pong == "last"; }, in(60s)))
      << count.pongs << " pongs, the last: " << count.last_pong << "; bad frames: " << count.bad;
  EXPECT_LE(count.pongs, 10) << "pongs queued for a client that does not read";
  // The backlog (3000 replies and the updates) arrives as whole frames: the writes that waited went on
  // where they stopped.
  ASSERT_TRUE(count.read_until(
      c.sock(), [](const FrameCount& n) { return n.texts >= 3001; }, in(60s)))
      << count.texts << " text frames; bad frames: " << count.bad;
  expect_healthy(port(), "a client that pinged without reading");
  expect_clean_stop();
}

// A client that streams empty frames as fast as it can: the agent's I/O thread still serves others while
// it does (it yields after a bounded read), instead of parsing that stream until it stops.
TEST_F(Serve, ADeflateClientStreamingFramesDoesNotHoldTheIoThread) {
  ASSERT_TRUE(start("sim", {"--interval", "0.2"}));
  WsConn flood(port(), "/ws?period_ms=100000", std::nullopt, 0, kOfferDeflate);
  ASSERT_TRUE(flood.open()) << flood.handshake.raw_head;
  // One message begun and never ended: empty continuations, with pongs between them.
  ASSERT_TRUE(flood.sock().send_all(masked_frame(0x01, "")));
  std::string block;
  while (block.size() < (1u << 20)) block += masked_frame(0x8A, "") + masked_frame(0x00, "");
  std::atomic<bool> stop{false}, flooding{true};
  std::thread sender([&] {
    // At most 30 s: the answer below stops it earlier.
    const auto until = in(30s);
    while (!stop && Clock::now() < until && flood.sock().send_all(block)) {
    }
    flooding = false;
  });
  std::this_thread::sleep_for(300ms);
  const auto r = get(port(), "/api/health");
  const bool answered_during_the_flood = flooding.load();
  stop = true;
  sender.join();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(answered_during_the_flood) << "the health request waited for the flood to end";
  expect_clean_stop();
}

}  // namespace
}  // namespace gf::serve_test
