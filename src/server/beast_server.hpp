#pragma once
// The Beast transport's shared state, for its translation units and nothing else in gpufleet:
//   http_server.cpp   the listener and the server's life (accept, caps, drain, finish): no HTTP parsing;
//   http_session.cpp  an HTTP connection: requests, static files, Socket.IO polling, the upgrades (decided
//                     by server/handshake, which knows no Beast);
//   websocket.cpp     the WebSocket connection, one class for /ws and Socket.IO, over
//   ws_link.cpp       one WebSocket behind plain callbacks: the only file that instantiates Beast's
//                     WebSocket stream, each operation once.
// Beast is slow to compile; kept apart, no file instantiates more of it than it uses, and Asio and Beast
// are compiled once, separately (server/beast/impl.cpp).
#include <utility>  // before asio (GCC 12, see STACK.md)

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/http_server.hpp"
#include "server/security.hpp"

namespace gf::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// An HTTP connection as the server holds it (http_session.cpp).
class HttpConnection {
 public:
  virtual ~HttpConnection() = default;
  // Waiting for a request (a whole header has not come), and not already being closed.
  virtual bool idle() const = 0;
  virtual std::chrono::steady_clock::time_point idle_since() const = 0;
  virtual void evict() = 0;          // makes room for a newcomer at the connection cap
  virtual void close_if_idle() = 0;  // drain: a connection handling a request finishes it first
  virtual void force_close() = 0;
};

// A WebSocket connection (/ws or Socket.IO) as the server holds it: closed at once after the loop, or
// with "going away" when a drain starts.
class WsConnection {
 public:
  virtual ~WsConnection() = default;
  virtual void force_close() = 0;
  virtual void close_going_away() = 0;
};

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(const Router& r, WsHub* w, ServerOptions o, SocketIo* s)
      : router(r),
        ws(w),
        sio(w ? s : nullptr),
        opts(std::move(o)),
        acceptor(ioc),
        pool(opts.workers ? opts.workers : 1),
        fresh_pool(1),
        signals(ioc) {
    tokens = {opts.token, opts.read_token};
    host_names = machine_host_names();
    host_names.insert(host_names.end(), opts.allowed_hosts.begin(), opts.allowed_hosts.end());
  }

  const Router& router;
  WsHub* ws;
  SocketIo* sio;  // null: no /socket.io/
  ServerOptions opts;
  ReadTokens tokens;  // from opts
  asio::io_context ioc{1};
  tcp::acceptor acceptor;
  asio::thread_pool pool;
  // Requests for a fresh driver reading: one thread, since the agent shares one reading among them
  // anyway; the store's requests on `pool` never queue behind them.
  asio::thread_pool fresh_pool;
  asio::signal_set signals;
  std::vector<std::string> host_names;  // allowed Host names (besides IP literals and localhost)
  // Open connections by client address. Sessions may end on a worker thread (the last reference is a
  // finished handler's), hence the lock.
  std::mutex addresses_mu;
  std::unordered_map<std::string, std::size_t> per_address;
  unsigned short port = 0;
  std::atomic<std::size_t> connections{0};
  // WebSocket handshakes under way: counted against the client cap with the joined clients, so a burst
  // of upgrades never gets past it (each one beyond it gets 503 before the handshake).
  std::atomic<std::size_t> ws_pending{0};
  bool draining = false;  // I/O thread only
  // Live sessions (I/O thread only), so that a drain can close the idle ones.
  std::list<std::weak_ptr<HttpConnection>> http_sessions;
  std::list<std::weak_ptr<WsConnection>> ws_sessions;
  std::list<std::weak_ptr<WsConnection>> sio_ws_sessions;
  // Socket.IO's pings and timeouts, once a second.
  void start_sio_timer();
  asio::steady_timer sio_timer{ioc};

  void accept();
  // Every few seconds: forgets ended sessions and, after many connections closed since the last look,
  // hands the freed heap back to the kernel (glibc keeps it otherwise: a burst of 4 000 idle
  // connections would stay in the agent's RSS after they are gone).
  void start_trim_timer();
  asio::steady_timer trim_timer{ioc};
  std::size_t trim_high_water = 0;
  // The reactor's per-socket states, made ahead of the sockets that will use them, in blocks: the first
  // before any connection, the next when the open sockets come near what is reserved, up to as many
  // sockets as may be open (state_limit).
  void reserve_descriptor_states(std::size_t upto);
  void reserve_ahead();  // on each accepted connection: the next block when it is due
  std::size_t reserved_states = 0;
  std::size_t state_limit = 0;
  // Closes the HTTP connection that has waited longest without a request in flight; false when none.
  bool evict_idle();
  void release_address(const std::string& address);
  void begin_drain();
  // Starts a drain and ends the loop once no connection is left, or at the drain timeout.
  void drain();
  void check_drained(std::shared_ptr<asio::steady_timer> timer, std::chrono::steady_clock::time_point deadline);
  // After the loop: closes what is left and runs the completions, so no session outlives the server.
  void finish();
};

// http_session.cpp: a connection the listener admitted, reading its first request.
std::shared_ptr<HttpConnection> start_http_session(std::shared_ptr<HttpServer::Impl> srv, tcp::socket&& socket,
                                                   std::string address);

// websocket.cpp. An upgrade the HTTP session has decided to accept: the WebSocket handshake on its
// stream, then the connection. The returned connection is the server's to close (weakly held).
std::shared_ptr<WsConnection> start_ws_session(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream,
                                               http::request<http::empty_body> req,
                                               std::optional<std::chrono::milliseconds> period,
                                               std::string subprotocol);
// `fresh`: a Socket.IO session opened on this WebSocket (it gets the open packet first); else an upgrade.
std::shared_ptr<WsConnection> start_sio_ws_session(std::shared_ptr<HttpServer::Impl> srv, beast::tcp_stream&& stream,
                                                   std::shared_ptr<SioSession> session,
                                                   http::request<http::empty_body> req, bool fresh);

}  // namespace gf::server
