// Live-client load for bench/http_bench.sh and bench/live_clients.sh: opens N clients of the agent's /ws, of
// Socket.IO over WebSocket (--protocol sio) or of Socket.IO on long-polling (--protocol polling), keeps them
// reading for D seconds, and reports how many connected, the messages received, each client's update rate
// and the time between a client's consecutive updates. With --pid it also measures that process (the agent)
// over the same window: CPU (utime+stime from /proc/PID/stat), VmRSS (sampled every 100 ms, max and last)
// and VmHWM. With --probe PATH it times a GET of PATH every 50 ms during the window (p50/p99/max).
//
//   gf_ws_fanout --url ws://127.0.0.1:PORT/ws?period_ms=1000 [--protocol ws|sio|polling] [--clients 1000]
//                [--duration 10] [--threads 1] [--connect-concurrency 64] [--connect-timeout 20] [--pid PID]
//                [--ready-file F] [--probe /api/v1/monitoring/gpu-metrics] [--deflate]
//
// For Socket.IO the URL's path and query are the Engine.IO ones, e.g.
// ws://127.0.0.1:PORT/socket.io/?EIO=4&transport=websocket&period_ms=1000 (polling: transport=polling;
// the client adds &sid=). --deflate offers permessage-deflate (client_no_context_takeover).
//
// The window starts once every client has connected (or failed, or --connect-timeout passed) and lasts
// --duration seconds; --ready-file is written at its start. Output: a human summary, then one line
// "RESULT key=value ..." for scripts. Exit status 0 when every client connected and stayed connected.

// Boost 1.74's HTTP parser trips GCC 12's -Wmaybe-uninitialized (a false positive in basic_parser.hpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/text.hpp"
#include "live_load.hpp"

namespace {

namespace asio = boost::asio;
using gf::bench::Clock;
using gf::bench::LoadClient;
using gf::bench::Options;
using gf::bench::Protocol;
using gf::bench::Shared;
using gf::bench::tcp;

// /proc/PID readings of the measured process.
struct ProcSample {
  double cpu_s = -1;  // utime + stime
  long rss_kib = -1, hwm_kib = -1;
};

ProcSample read_proc(long pid) {
  ProcSample s;
  if (pid <= 0) return s;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the command (which may hold spaces) start at the last ')'; utime and stime are fields 14 and 15.
    std::istringstream in(line.substr(line.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
      if (i == 14) utime = gf::core::parse_uint(field).value_or(0);
      if (i == 15) stime = gf::core::parse_uint(field).value_or(0);
    }
    s.cpu_s = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::atol(line.c_str() + 6);
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_kib = std::atol(line.c_str() + 6);
  }
  return s;
}

double self_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr
      << "gf_ws_fanout: " << why << "\n"
      << "usage: gf_ws_fanout --url ws://HOST:PORT/PATH [--protocol ws|sio|polling] [--clients N] [--duration S]\n"
         "                    [--threads T] [--connect-concurrency K] [--connect-timeout S] [--pid PID]\n"
         "                    [--ready-file F] [--probe PATH] [--deflate] [--dump F]\n";
  std::exit(2);
}

// A whole number for a count option, or the usage.
int count(const std::string& option, const std::string& text) {
  const auto n = gf::core::parse_uint(text, 0, 10000000);
  if (!n) usage(option + ": " + n.error().message);
  return static_cast<int>(*n);
}

void raise_nofile(int clients) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = static_cast<rlim_t>(clients) + 64;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = std::min(rl.rlim_max, std::max(want, rl.rlim_cur));
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
    rlimit up = rl;
    up.rlim_max = up.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &up) == 0) return;  // root may raise the hard limit too
  }
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want)
    std::cerr << "gf_ws_fanout: warning: RLIMIT_NOFILE is " << rl.rlim_cur << ", below " << want << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--url") {
      std::string url = value();
      if (url.rfind("ws://", 0) != 0) usage("only ws:// URLs");
      url = url.substr(5);
      const auto slash = url.find('/');
      const std::string hostport = url.substr(0, slash);
      opt.target = slash == std::string::npos ? "/" : url.substr(slash);
      const auto colon = hostport.rfind(':');
      if (colon == std::string::npos) usage("the URL needs a port");
      opt.host = hostport.substr(0, colon);
      opt.port = hostport.substr(colon + 1);
    } else if (arg == "--clients") {
      opt.clients = count(arg, value());
    } else if (arg == "--duration") {
      opt.duration_s = std::atof(value().c_str());
    } else if (arg == "--threads") {
      opt.threads = std::max(1, count(arg, value()));
    } else if (arg == "--connect-concurrency") {
      opt.connect_concurrency = std::max(1, count(arg, value()));
    } else if (arg == "--connect-timeout") {
      opt.connect_timeout_s = std::atof(value().c_str());
    } else if (arg == "--pid") {
      opt.pid = std::atol(value().c_str());
    } else if (arg == "--ready-file") {
      opt.ready_file = value();
    } else if (arg == "--probe") {
      opt.probe_target = value();
      if (opt.probe_target.empty() || opt.probe_target[0] != '/') usage("--probe takes a path, e.g. /api/health");
    } else if (arg == "--dump") {
      opt.dump_file = value();
    } else if (arg == "--deflate") {
      opt.deflate = true;
    } else if (arg == "--protocol") {
      const std::string p = value();
      if (p == "ws") {
        opt.protocol = Protocol::Ws;
      } else if (p == "sio") {
        opt.protocol = Protocol::SioWs;
      } else if (p == "polling") {
        opt.protocol = Protocol::SioPolling;
      } else {
        usage("--protocol: ws, sio or polling");
      }
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (opt.port.empty()) usage("--url is required");
  if (opt.clients < 1 || opt.duration_s <= 0) usage("--clients and --duration must be positive");
  raise_nofile(opt.clients);

  asio::io_context ioc(opt.threads);
  tcp::resolver resolver(ioc);
  boost::system::error_code ec;
  const auto endpoints = resolver.resolve(opt.host, opt.port, ec);
  if (ec) usage("cannot resolve " + opt.host + ":" + opt.port + ": " + ec.message());

  Shared shared;
  std::vector<std::shared_ptr<LoadClient>> clients;
  clients.reserve(static_cast<std::size_t>(opt.clients));
  std::atomic<int> next{0};
  // Connections are opened at most --connect-concurrency at a time; each settled one starts the next.
  std::function<void()> start_next = [&] {
    const int i = next++;
    if (i < opt.clients) asio::post(ioc, [&, i] { clients[static_cast<std::size_t>(i)]->start(); });
  };
  for (int i = 0; i < opt.clients; ++i)
    clients.push_back(opt.protocol == Protocol::Ws ? gf::bench::make_ws_client(ioc, opt, endpoints, shared, start_next)
                      : opt.protocol == Protocol::SioWs
                          ? gf::bench::make_sio_ws_client(ioc, opt, endpoints, shared, start_next)
                          : gf::bench::make_sio_polling_client(ioc, opt, endpoints, shared, start_next));

  const auto connect_start = Clock::now();
  for (int i = 0; i < std::min(opt.connect_concurrency, opt.clients); ++i) start_next();

  auto work = asio::make_work_guard(ioc);
  std::vector<std::thread> threads;
  for (int t = 0; t < opt.threads; ++t) threads.emplace_back([&] { ioc.run(); });

  // Wait (on this thread) for every client to settle, then measure for the window.
  const auto connect_deadline =
      connect_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.connect_timeout_s));
  while (shared.settled < opt.clients && Clock::now() < connect_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto t0 = Clock::now();
  shared.window_start = t0;
  const double connect_s = std::chrono::duration<double>(t0 - connect_start).count();
  const int connected_at_start = shared.connected;
  auto wire = [&] {
    std::uint64_t n = 0;
    for (const auto& c : clients) n += c->wire_bytes();
    return n;
  };
  const std::uint64_t wire0 = wire();
  const ProcSample p0 = read_proc(opt.pid);
  const double self0 = self_cpu_s();
  if (!opt.ready_file.empty()) std::ofstream(opt.ready_file) << "ready\n";
  std::atomic<bool> probe_stop{false};
  std::vector<double> probe_ms;
  std::thread probe;
  if (!opt.probe_target.empty()) probe = std::thread([&] { probe_ms = gf::bench::probe_latencies(opt, probe_stop); });

  long rss_max = p0.rss_kib;
  const auto t_end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.duration_s));
  while (Clock::now() < t_end) {
    std::this_thread::sleep_until(std::min(t_end, Clock::now() + std::chrono::milliseconds(100)));
    rss_max = std::max(rss_max, read_proc(opt.pid).rss_kib);
  }
  const auto t1 = Clock::now();
  const std::uint64_t wire1 = wire();
  probe_stop = true;
  if (probe.joinable()) probe.join();
  const ProcSample p1 = read_proc(opt.pid);
  const double self1 = self_cpu_s();
  rss_max = std::max(rss_max, p1.rss_kib);
  const int dropped = shared.dropped;

  shared.stopping = true;
  for (auto& c : clients) c->close();
  work.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the closes go out
  ioc.stop();
  for (auto& t : threads) t.join();

  // Aggregate.
  const double window_s = std::chrono::duration<double>(t1 - t0).count();
  std::uint64_t messages = 0, bytes = 0, all_messages = 0;
  int initial = 0;
  std::vector<double> rates, gaps_ms;
  std::map<std::string, std::uint64_t> events;
  std::ofstream dump;
  if (!opt.dump_file.empty()) dump.open(opt.dump_file);
  int index = -1;
  for (const auto& c : clients) {
    ++index;
    if (!c->connected()) continue;
    messages += c->messages_in(t0, t1);
    bytes += c->bytes();
    all_messages += c->total_messages();
    initial += c->got_initial() ? 1 : 0;
    for (const auto& [e, n] : c->events()) events[e] += n;
    const auto& u = c->updates();
    std::uint64_t n = 0;
    for (std::size_t k = 0; k < u.size(); ++k) {
      if (u[k] < t0 || u[k] > t1) continue;
      ++n;
      if (dump.is_open()) dump << index << ' ' << std::chrono::duration<double, std::milli>(u[k] - t0).count() << '\n';
      if (k > 0 && u[k - 1] >= t0)
        gaps_ms.push_back(std::chrono::duration<double, std::milli>(u[k] - u[k - 1]).count());
    }
    rates.push_back(static_cast<double>(n) / window_s);
  }
  const double rate_min = rates.empty() ? 0 : *std::min_element(rates.begin(), rates.end());
  double rate_mean = 0;
  for (double r : rates) rate_mean += r;
  if (!rates.empty()) rate_mean /= static_cast<double>(rates.size());
  const double gap_max = gaps_ms.empty() ? 0 : *std::max_element(gaps_ms.begin(), gaps_ms.end());
  const double cpu_pct = p0.cpu_s >= 0 && p1.cpu_s >= 0 ? (p1.cpu_s - p0.cpu_s) / window_s * 100 : -1;
  const double self_pct = (self1 - self0) / window_s * 100;

  std::printf(
      "clients: %d requested, %d connected in %.2f s (%d received the initial gpu_status), %d dropped during the "
      "window\n",
      opt.clients, connected_at_start, connect_s, initial, dropped);
  std::printf("window: %.2f s; messages: %llu (%.1f/s); mean message %.0f bytes\n", window_s,
              static_cast<unsigned long long>(messages), static_cast<double>(messages) / window_s,
              all_messages ? static_cast<double>(bytes) / static_cast<double>(all_messages) : 0.0);
  std::printf("messages in the window by event:");
  for (const auto& [e, n] : events) std::printf(" %s=%llu", e.c_str(), static_cast<unsigned long long>(n));
  std::printf("\n");
  std::printf("per-client update rate: min %.2f/s, mean %.2f/s\n", rate_min, rate_mean);
  std::printf("time between a client's consecutive updates: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%zu gaps)\n",
              percentile(gaps_ms, 50), percentile(gaps_ms, 99), gap_max, gaps_ms.size());
  if (opt.pid > 0)
    std::printf("pid %ld over the window: CPU %.1f %% of one core; VmRSS max %ld KiB, last %ld KiB; VmHWM %ld KiB\n",
                opt.pid, cpu_pct, rss_max, p1.rss_kib, p1.hwm_kib);
  const double wire_per_s = static_cast<double>(wire1 - std::min(wire0, wire1)) / window_s;
  std::printf("bytes received on the wire (TCP_INFO) over the window: %.0f/s, %.0f per message\n", wire_per_s,
              messages ? wire_per_s * window_s / static_cast<double>(messages) : 0.0);
  std::vector<double> probe_ok;
  std::size_t probe_failed = 0;
  for (double ms : probe_ms) (ms < 0 ? (void)++probe_failed : probe_ok.push_back(ms));
  const double probe_max = probe_ok.empty() ? 0 : *std::max_element(probe_ok.begin(), probe_ok.end());
  if (!opt.probe_target.empty())
    std::printf("GET %s during the window: %zu requests, %zu failed; p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                opt.probe_target.c_str(), probe_ms.size(), probe_failed, percentile(probe_ok, 50),
                percentile(probe_ok, 99), probe_max);
  std::printf("this client's own CPU over the window: %.1f %% of one core\n", self_pct);
  {
    std::lock_guard lock(shared.mu);
    for (const auto& [what, n] : shared.errors) std::printf("error x%d: %s\n", n, what.c_str());
  }
  std::printf(
      "RESULT clients=%d connected=%d dropped=%d connect_s=%.2f window_s=%.2f messages=%llu msgs_per_s=%.1f "
      "rate_min=%.2f rate_mean=%.2f gap_p50_ms=%.1f gap_p99_ms=%.1f gap_max_ms=%.1f cpu_pct=%.1f rss_max_kib=%ld "
      "rss_kib=%ld hwm_kib=%ld client_cpu_pct=%.1f wire_bytes_per_s=%.0f probe_n=%zu probe_failed=%zu "
      "probe_p50_ms=%.2f probe_p99_ms=%.2f probe_max_ms=%.2f\n",
      opt.clients, connected_at_start, dropped, connect_s, window_s, static_cast<unsigned long long>(messages),
      static_cast<double>(messages) / window_s, rate_min, rate_mean, percentile(gaps_ms, 50), percentile(gaps_ms, 99),
      gap_max, cpu_pct, rss_max, p1.rss_kib, p1.hwm_kib, self_pct, wire_per_s, probe_ms.size(), probe_failed,
      percentile(probe_ok, 50), percentile(probe_ok, 99), probe_max);
  std::fflush(stdout);
  return connected_at_start == opt.clients && dropped == 0 && probe_failed == 0 ? 0 : 1;
}
