#pragma once
// HttpServer: HTTP/1.1 (keep-alive) and WebSocket on one port, over Boost.Beast — with the agent socket,
// the only part of gpufleet that knows Beast, kept behind this header in three translation units
// (server/beast_server.hpp says which does what; Beast is slow to compile). One I/O thread
// serves every connection; handlers that may block (store) run on a small worker pool, requests for a
// fresh driver reading on a pool of their own (a flood of them never delays the store's requests), and
// hand their response back to the I/O thread. A request's header is read first (into a buffer bounded
// by header_limit) and answered from it when it is refused (400, 401, 404, 405, 421, 431); the body is
// read only for a request that passed. Socket.IO (Engine.IO v4 polling and WebSocket) is served at
// /socket.io/ when a SocketIo is given.
// Thread-safety: listen() and run() from one thread; stop() from any thread (or a signal).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "server/router.hpp"
#include "server/socketio.hpp"
#include "server/ws_hub.hpp"

namespace gf::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  unsigned short port = 9401;
  std::string static_dir;  // the dashboard; empty: none
  std::string token;       // bearer token for Access::Write routes (and all with auth_read)
  bool auth_read = false;
  // With auth_read: a second token that reads (HTTP, /ws, Socket.IO) and changes nothing; empty: none.
  std::string read_token;
  std::size_t header_limit = 8 * 1024;               // bytes; more → 431
  std::size_t body_limit = 1024 * 1024;              // bytes; more → 413
  std::chrono::milliseconds request_timeout{15000};  // to receive a request's body once its header is in
  // A new connection must send a whole header within this (and within request_timeout); one kept alive
  // may wait this long for its next request. Slowloris and idle sockets go away on their own.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds keep_alive_timeout{30000};
  // HTTP + WebSocket. At the cap a newcomer takes the place of the connection idle longest (no request
  // in flight); only when none is idle is it closed at once.
  std::size_t max_connections = 4096;
  // Connections from one client address (loopback counts like any other): more are closed at once, so
  // one client cannot fill max_connections for everyone.
  std::size_t max_connections_per_address = 256;
  // Host names this agent answers to besides IP literals, localhost and the machine's own names; any
  // other Host gets 421 (DNS rebinding).
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;           // WebSocket Origins allowed besides our own address
  std::size_t ws_queue = 32;                          // messages waiting per WebSocket client
  std::chrono::milliseconds ws_stall_timeout{10000};  // a write pending this long closes the client
  std::size_t ws_message_limit = 64 * 1024;
  unsigned workers = 2;
  std::chrono::milliseconds drain_timeout{5000};  // on stop: in-flight requests get this long
  std::string server_header = "gpufleet";
};

class HttpServer {
 public:
  // ws may be null (no /ws), sio too (no /socket.io/; it needs ws). router, ws and sio outlive the server.
  HttpServer(const Router& router, WsHub* ws, ServerOptions options, SocketIo* sio = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; returns the port (the chosen one when options.port is 0).
  Result<unsigned short> listen();
  // Serves until stop() (or SIGINT/SIGTERM when handle_signals), then drains: no new connections,
  // in-flight requests finish (up to drain_timeout), WebSocket clients get a "going away" close.
  void run(bool handle_signals);
  void stop();

  std::size_t connections() const;

  struct Impl;  // opaque (server/beast_server.hpp); public only so that the sessions can name it

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace gf::server
