#pragma once
// The live-client load generator's parts (bench/ws_fanout.cpp): what every kind of client records, the
// options, and the Socket.IO clients (bench/live_load_sio.cpp). One io_context thread or two run all of
// them (epoll through Asio): the load must cost the machine far less than the agent it measures.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace gf::bench {

using Clock = std::chrono::steady_clock;
using tcp = boost::asio::ip::tcp;

enum class Protocol { Ws, SioWs, SioPolling };

struct Options {
  std::string host = "127.0.0.1";
  std::string port;
  std::string target = "/ws?period_ms=1000";
  Protocol protocol = Protocol::Ws;
  int clients = 1000;
  double duration_s = 10;
  int threads = 1;
  int connect_concurrency = 64;
  double connect_timeout_s = 20;
  long pid = 0;
  std::string ready_file;
  std::string probe_target;  // a GET timed every probe_interval_ms during the window ("" = none)
  int probe_interval_ms = 50;
  bool deflate = false;   // /ws and Socket.IO over WebSocket: offer permessage-deflate
  std::string dump_file;  // each update in the window: "client ms" (ms after the window's start), for the gaps' causes
};

struct Shared {
  std::mutex mu;
  std::map<std::string, int> errors;  // error text -> count (connect failures and drops)
  std::atomic<int> connected{0};
  std::atomic<int> settled{0};  // connected or failed to
  std::atomic<int> dropped{0};  // connected, then lost before the window's end
  std::atomic<bool> stopping{false};
  std::atomic<Clock::time_point> window_start{Clock::time_point::max()};
  void error(const std::string& what) {
    std::lock_guard lock(mu);
    ++errors[what];
  }
};

// What one client saw; read after the io threads have stopped.
class LoadClient {
 public:
  virtual ~LoadClient() = default;
  virtual void start() = 0;
  virtual void close() = 0;
  // Bytes this client's socket has received from the wire (TCP_INFO), compressed or not; 0 when closed.
  virtual std::uint64_t wire_bytes() const = 0;

  const std::vector<Clock::time_point>& updates() const { return updates_; }
  std::uint64_t messages_in(Clock::time_point t0, Clock::time_point t1) const {
    std::uint64_t n = 0;
    for (auto t : all_) n += t >= t0 && t <= t1 ? 1 : 0;
    return n;
  }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t total_messages() const { return all_.size(); }
  bool got_initial() const { return initial_; }
  const std::map<std::string, std::uint64_t>& events() const { return events_; }
  bool connected() const { return connected_; }

 protected:
  LoadClient(const Options& opt, Shared& shared, std::function<void()> on_settled)
      : opt_(opt), shared_(shared), on_settled_(std::move(on_settled)) {}
  // One message of `bytes` bytes naming `event`: gpu_status_update counts as an update, gpu_status as
  // the greeting.
  void record(std::string_view event, std::size_t bytes) {
    const auto now = Clock::now();
    if (event == "gpu_status_update") {
      updates_.push_back(now);
    } else if (event == "gpu_status") {
      initial_ = true;
    }
    if (now >= shared_.window_start.load() && !shared_.stopping) ++events_[std::string(event)];
    all_.push_back(now);
    bytes_ += bytes;
  }
  void fail(const std::string& what) {
    shared_.error(what);
    settle();
  }
  void on_connected() {
    connected_ = true;
    shared_.connected++;
    settle();
  }
  void settle() {
    shared_.settled++;
    on_settled_();
  }
  // The connection ended: a drop unless the run is ending.
  void lost(const std::string& what) {
    if (shared_.stopping) return;
    shared_.dropped++;
    shared_.error("dropped: " + what);
  }

  const Options& opt_;
  Shared& shared_;
  std::function<void()> on_settled_;

 private:
  std::vector<Clock::time_point> updates_, all_;
  std::map<std::string, std::uint64_t> events_;
  std::uint64_t bytes_ = 0;
  bool initial_ = false, connected_ = false;
};

using Settled = std::function<void()>;
std::shared_ptr<LoadClient> make_ws_client(boost::asio::io_context& ioc, const Options& opt,
                                           const tcp::resolver::results_type& endpoints, Shared& shared, Settled s);
std::shared_ptr<LoadClient> make_sio_ws_client(boost::asio::io_context& ioc, const Options& opt,
                                               const tcp::resolver::results_type& endpoints, Shared& shared, Settled s);
std::shared_ptr<LoadClient> make_sio_polling_client(boost::asio::io_context& ioc, const Options& opt,
                                                    const tcp::resolver::results_type& endpoints, Shared& shared,
                                                    Settled s);

// tcpi_bytes_received of a connected socket (0 when none).
std::uint64_t tcp_bytes_received(int fd);

// The event name of a Socket.IO event packet's text ("42[\"name\",…" → name), "" when it is none.
std::string_view sio_event_name(std::string_view packet);

// Times GET probe_target on one keep-alive connection every probe_interval_ms until `stop`; the
// latencies in milliseconds (a failed request counts as -1).
std::vector<double> probe_latencies(const Options& opt, const std::atomic<bool>& stop);

}  // namespace gf::bench
