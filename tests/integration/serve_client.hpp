#pragma once
// The client side of the `gpufleet serve` tests (serve_*_test.cpp): HTTP/1.1 and WebSocket spoken by hand
// over raw POSIX sockets (a minimal RFC 6455 client), so that tests can send bytes no library would.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text.hpp"

namespace gf::serve_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

inline Clock::time_point in(std::chrono::milliseconds d) { return Clock::now() + d; }
inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// ---------------------------------------------------------------------------------------------------
// A TCP connection to the agent, with deadline-bounded reads into a buffer.

class Sock {
 public:
  enum class Got { Data, Eof, Timeout, Error };

  Sock() = default;
  // rcvbuf > 0: set SO_RCVBUF before connecting (so the TCP window stays small).
  // source: the local address to connect from (127.0.0.x: another client address on loopback).
  explicit Sock(unsigned short port, int rcvbuf = 0, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (source) {
      sockaddr_in b{};
      b.sin_family = AF_INET;
      if (::inet_pton(AF_INET, source, &b.sin_addr) != 1 ||
          ::bind(fd_, reinterpret_cast<sockaddr*>(&b), sizeof b) != 0) {
        ::close(fd_);
        fd_ = -1;
        return;
      }
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  Sock(const Sock&) = delete;
  Sock& operator=(const Sock&) = delete;
  Sock(Sock&& o) noexcept : buf(std::move(o.buf)), fd_(std::exchange(o.fd_, -1)) {}
  Sock& operator=(Sock&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
      buf = std::move(o.buf);
    }
    return *this;
  }
  ~Sock() { close(); }

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_all(std::string_view data) {
    while (!data.empty()) {
      const auto n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Appends what arrives (one read) to buf; waits until the deadline at most.
  Got fill(Clock::time_point deadline) {
    for (;;) {
      // A deadline already past still looks once (poll with 0) for what has arrived.
      const auto left =
          std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count());
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Got::Error;
      if (r == 0) return Got::Timeout;
      char tmp[65536];
      const auto n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return Got::Error;  // ECONNRESET counts as closed too
      if (n == 0) return Got::Eof;
      buf.append(tmp, static_cast<std::size_t>(n));
      return Got::Data;
    }
  }

  // True when the peer closes (EOF or reset) before the deadline; bytes that arrive meanwhile are kept.
  bool closed_by(Clock::time_point deadline) {
    for (;;) {
      const Got g = fill(deadline);
      if (g == Got::Eof || g == Got::Error) return true;
      if (g == Got::Timeout) return false;
    }
  }

  std::string buf;

 private:
  int fd_ = -1;
};

// ---------------------------------------------------------------------------------------------------
// HTTP/1.1 by hand.

struct HttpResponse {
  int status = 0;                              // 0: no (complete) response
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string raw_head;
  std::string header(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? std::string() : it->second;
  }
  json body_json() const { return json::parse(body, nullptr, false); }
};

// Reads one response from s (what follows stays in s.buf). status 0 when it did not come whole.
inline HttpResponse read_response(Sock& s, Clock::time_point deadline, bool head = false) {
  HttpResponse r;
  std::size_t end = std::string::npos;
  bool closed = false;
  while ((end = s.buf.find("\r\n\r\n")) == std::string::npos) {
    const auto g = s.fill(deadline);
    if (g != Sock::Got::Data) return r;
  }
  r.raw_head = s.buf.substr(0, end);
  std::istringstream lines(r.raw_head);
  std::string line;
  std::getline(lines, line);
  if (line.rfind("HTTP/1.1 ", 0) != 0 || line.size() < 12) return r;
  const int status = std::atoi(line.substr(9, 3).c_str());
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    r.headers[core::lower(line.substr(0, colon))] = v;
  }
  s.buf.erase(0, end + 4);
  std::size_t length = 0;
  const bool has_length = r.headers.count("content-length") > 0;
  if (has_length) length = std::stoul(r.headers["content-length"]);
  // No body after HEAD, 1xx (the WebSocket upgrade's 101), 204 or 304: what follows is the next message.
  const bool bodiless = head || (status >= 100 && status < 200) || status == 204 || status == 304;
  if (bodiless) length = 0;
  if (has_length || bodiless) {
    while (s.buf.size() < length) {
      const auto g = s.fill(deadline);
      if (g != Sock::Got::Data) return HttpResponse{};
    }
    r.body = s.buf.substr(0, length);
    s.buf.erase(0, length);
  } else {
    while (!closed) {
      const auto g = s.fill(deadline);
      if (g == Sock::Got::Timeout) return HttpResponse{};
      closed = g != Sock::Got::Data;
    }
    r.body = std::move(s.buf);
    s.buf.clear();
  }
  r.status = status;
  return r;
}

inline std::string request_text(const std::string& method, const std::string& target, const std::string& body = {},
                                const std::vector<std::string>& headers = {}, bool close = true) {
  std::string t = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& h : headers) t += h + "\r\n";
  if (!body.empty() || method == "POST") {
    t += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    t += "Content-Type: application/json\r\n";
  }
  if (close) t += "Connection: close\r\n";
  t += "\r\n" + body;
  return t;
}

// One request on a fresh connection.
inline HttpResponse http(unsigned short port, const std::string& method, const std::string& target,
                         const std::string& body = {}, const std::vector<std::string>& headers = {},
                         std::chrono::milliseconds timeout = 20s) {
  Sock s(port);
  if (!s.ok() || !s.send_all(request_text(method, target, body, headers))) {
    ADD_FAILURE() << "cannot send " << method << " " << target;
    return {};
  }
  auto r = read_response(s, in(timeout), method == "HEAD");
  EXPECT_NE(r.status, 0) << "no whole response to " << method << " " << target;
  return r;
}

inline HttpResponse get(unsigned short port, const std::string& target) { return http(port, "GET", target); }

inline json get_json(unsigned short port, const std::string& target, int want_status = 200) {
  auto r = get(port, target);
  EXPECT_EQ(r.status, want_status) << target << ": " << r.body;
  EXPECT_EQ(r.header("content-type").rfind("application/json", 0), 0u) << target;
  auto j = r.body_json();
  EXPECT_FALSE(j.is_discarded()) << target << ": " << r.body;
  return j;
}

inline void expect_healthy(unsigned short port, const std::string& after) {
  auto r = get(port, "/api/health");
  EXPECT_EQ(r.status, 200) << "after " << after << ": " << r.body;
}

// ---------------------------------------------------------------------------------------------------
// A minimal RFC 6455 client: handshake, unmasked server frames (7/16/64-bit lengths, fragments),
// masked client frames, pong for ping, close.

class WsConn {
 public:
  struct Message {
    std::string text;
    Clock::time_point at;
    int frames = 1;  // the frames it came in (a fragmented message: more than one)
    json j() const { return json::parse(text, nullptr, false); }
    std::string event() const {
      auto x = j();
      return x.is_object() && x.contains("event") && x["event"].is_string() ? x["event"].get<std::string>() : "";
    }
  };

  // Sends the upgrade request; handshake holds the server's answer (101 on success).
  WsConn(unsigned short port, const std::string& target, const std::optional<std::string>& origin = std::nullopt,
         int rcvbuf = 0, const std::vector<std::string>& headers = {})
      : s_(port, rcvbuf) {
    if (!s_.ok()) return;
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
    if (origin) req += "Origin: " + *origin + "\r\n";
    for (const auto& h : headers) req += h + "\r\n";
    req += "\r\n";
    if (!s_.send_all(req)) return;
    handshake = read_response(s_, in(20s));
  }

  bool open() const {
    // The RFC's own example key and accept value.
    return handshake.status == 101 && handshake.header("sec-websocket-accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
  }
  bool closed() const { return closed_; }
  std::optional<unsigned> close_code() const { return close_code_; }
  Sock& sock() { return s_; }

  // The next text message, or nullopt at the deadline or when the connection ends.
  std::optional<Message> next(Clock::time_point deadline) {
    std::string message;
    int frames = 0;
    for (;;) {
      auto f = frame(deadline);
      if (!f) return std::nullopt;
      const auto [opcode, fin, payload] = *f;
      if (opcode == 0x9) {  // ping → pong with the same payload
        send_frame(0xA, payload);
        continue;
      }
      if (opcode == 0xA) continue;
      if (opcode == 0x8) {
        closed_ = true;
        if (payload.size() >= 2)
          close_code_ = (static_cast<unsigned>(static_cast<unsigned char>(payload[0])) << 8) |
                        static_cast<unsigned char>(payload[1]);
        if (!close_sent_) send_frame(0x8, payload.substr(0, 2));
        close_sent_ = true;
        return std::nullopt;
      }
      message += payload;  // text (1) or continuation (0)
      ++frames;
      if (fin) return Message{std::move(message), Clock::now(), frames};
    }
  }

  // The next message whose event is `event` (others are skipped), or nullopt.
  std::optional<Message> next_event(const std::string& event, Clock::time_point deadline) {
    while (auto m = next(deadline))
      if (m->event() == event) return m;
    return std::nullopt;
  }

  bool send_text(const std::string& text) { return send_frame(0x1, text); }
  bool send_close(unsigned code) {
    close_sent_ = true;
    std::string p{static_cast<char>(code >> 8), static_cast<char>(code & 0xff)};
    return send_frame(0x8, p);
  }

  HttpResponse handshake;

 private:
  bool send_frame(unsigned opcode, const std::string& payload) {
    std::string f;
    f.push_back(static_cast<char>(0x80 | opcode));
    const std::size_t n = payload.size();
    if (n < 126) {
      f.push_back(static_cast<char>(0x80 | n));
    } else if (n < 65536) {
      f.push_back(static_cast<char>(0x80 | 126));
      f.push_back(static_cast<char>(n >> 8));
      f.push_back(static_cast<char>(n & 0xff));
    } else {
      f.push_back(static_cast<char>(0x80 | 127));
      for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((static_cast<std::uint64_t>(n) >> (8 * i)) & 0xff));
    }
    const unsigned char mask[4] = {static_cast<unsigned char>(rng_()), static_cast<unsigned char>(rng_()),
                                   static_cast<unsigned char>(rng_()), static_cast<unsigned char>(rng_())};
    f.append(reinterpret_cast<const char*>(mask), 4);
    for (std::size_t i = 0; i < n; ++i) f.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
    return s_.send_all(f);
  }

  struct Frame {
    unsigned opcode;
    bool fin;
    std::string payload;
  };
  std::optional<Frame> frame(Clock::time_point deadline) {
    for (;;) {
      if (auto f = parse_frame()) return f;
      if (s_.fill(deadline) != Sock::Got::Data) {
        if (Clock::now() < deadline) closed_ = true;
        return std::nullopt;
      }
    }
  }
  std::optional<Frame> parse_frame() {
    const std::string& b = s_.buf;
    if (b.size() < 2) return std::nullopt;
    const auto u = [&](std::size_t i) { return static_cast<std::uint64_t>(static_cast<unsigned char>(b[i])); };
    const bool fin = (u(0) & 0x80) != 0;
    const unsigned opcode = static_cast<unsigned>(u(0) & 0x0f);
    const bool masked = (u(1) & 0x80) != 0;
    std::uint64_t len = u(1) & 0x7f;
    std::size_t pos = 2;
    if (len == 126) {
      if (b.size() < 4) return std::nullopt;
      len = (u(2) << 8) | u(3);
      pos = 4;
    } else if (len == 127) {
      if (b.size() < 10) return std::nullopt;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | u(2 + static_cast<std::size_t>(i));
      pos = 10;
    }
    unsigned char mask[4] = {0, 0, 0, 0};
    if (masked) {
      if (b.size() < pos + 4) return std::nullopt;
      for (int i = 0; i < 4; ++i) mask[i] = static_cast<unsigned char>(b[pos + static_cast<std::size_t>(i)]);
      pos += 4;
    }
    if (b.size() < pos + len) return std::nullopt;
    Frame f{opcode, fin, b.substr(pos, len)};
    if (masked)
      for (std::size_t i = 0; i < f.payload.size(); ++i) f.payload[i] = static_cast<char>(f.payload[i] ^ mask[i % 4]);
    s_.buf.erase(0, pos + len);
    return f;
  }

  Sock s_;
  bool closed_ = false;
  bool close_sent_ = false;
  std::optional<unsigned> close_code_;
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace gf::serve_test
