// The listener and the server's life: accepting within the caps (per address, in all, evicting the
// connection idle longest), the heap trim, Socket.IO's timer, the drain on stop and the final close.
// The connections themselves are in http_session.cpp and websocket.cpp (server/beast_server.hpp).
#include "server/http_server.hpp"

#include <utility>  // before asio (GCC 12, see STACK.md)

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/beast_server.hpp"

namespace gf::server {

namespace {
constexpr std::size_t kStateBlock = 512;  // ~80 kB of states; a block is opened in about a millisecond
}  // namespace

void HttpServer::Impl::accept() {
  // The sockets run on the io_context itself, not on a strand each: one thread runs it, so a strand
  // would only add its locking and dispatch to every completion.
  acceptor.async_accept(ioc, [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
    if (!ec) {
      beast::error_code aec;
      auto remote = socket.remote_endpoint(aec).address();
      if (remote.is_v6() && remote.to_v6().is_v4_mapped())
        remote = asio::ip::make_address_v4(asio::ip::v4_mapped, remote.to_v6());
      const std::string address = aec ? std::string("?") : remote.to_string();
      bool admitted = false;
      {
        std::lock_guard lock(self->addresses_mu);
        auto& n = self->per_address[address];
        if (n < self->opts.max_connections_per_address) {
          ++n;
          admitted = true;
        } else if (n == 0) {
          self->per_address.erase(address);
        }
      }
      // At the global cap the newcomer takes the place of the connection idle longest: a crowd of
      // silent sockets cannot lock out a client that has something to ask.
      if (admitted && self->connections.load() >= self->opts.max_connections && !self->evict_idle()) {
        self->release_address(address);
        admitted = false;
      }
      if (!admitted) {
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        // An answer goes out in one write (header and body): nothing to gain from Nagle's delay.
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        // Forget sessions that ended, so the list stays the size of the live ones.
        self->http_sessions.remove_if([](const auto& w) { return w.expired(); });
        self->http_sessions.push_back(start_http_session(self, std::move(socket), address));
        self->trim_high_water = std::max(self->trim_high_water, self->connections.load());
        self->reserve_ahead();
      }
    }
    self->accept();
  });
}

bool HttpServer::Impl::evict_idle() {
  std::shared_ptr<HttpConnection> oldest;
  for (auto& w : http_sessions)
    if (auto s = w.lock(); s && s->idle() && (!oldest || s->idle_since() < oldest->idle_since())) oldest = s;
  if (!oldest) return false;
  oldest->evict();
  return true;
}

void HttpServer::Impl::release_address(const std::string& address) {
  std::lock_guard lock(addresses_mu);
  auto it = per_address.find(address);
  if (it == per_address.end()) return;
  if (--it->second == 0) per_address.erase(it);
}

void HttpServer::Impl::start_trim_timer() {
  trim_timer.expires_after(std::chrono::seconds(2));
  trim_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->draining) return;
    self->http_sessions.remove_if([](const auto& w) { return w.expired(); });
    self->ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    const std::size_t now = self->connections.load();
    self->trim_high_water = std::max(self->trim_high_water, now);
    if (self->trim_high_water >= now + 256) {
      ::malloc_trim(0);
      self->trim_high_water = now;
    }
    self->start_trim_timer();
  });
}

void HttpServer::Impl::begin_drain() {
  if (draining) return;
  draining = true;
  beast::error_code ignored;
  trim_timer.cancel();
  acceptor.close(ignored);
  signals.cancel(ignored);
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->close_if_idle();
  for (auto& w : ws_sessions)
    if (auto s = w.lock()) s->close_going_away();
  sio_timer.cancel();
  if (sio) sio->close_all();  // pending polls answer "close", Socket.IO WebSockets close
}

void HttpServer::Impl::start_sio_timer() {
  if (!sio) return;
  sio_timer.expires_after(std::chrono::seconds(1));
  sio_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->draining) return;
    self->sio->tick(std::chrono::steady_clock::now());
    self->sio_ws_sessions.remove_if([](const auto& w) { return w.expired(); });
    self->start_sio_timer();
  });
}

HttpServer::HttpServer(const Router& router, WsHub* ws, ServerOptions options, SocketIo* sio)
    : impl_(std::make_shared<Impl>(router, ws, std::move(options), sio)) {}

HttpServer::~HttpServer() {
  impl_->pool.join();
  impl_->fresh_pool.join();
}

Result<unsigned short> HttpServer::listen() {
  auto& i = *impl_;
  beast::error_code ec;
  const auto addr = asio::ip::make_address(i.opts.host, ec);
  if (ec) return make_error("cannot listen on '" + i.opts.host + "': not an IP address (use 127.0.0.1, 0.0.0.0 or ::)");
  const tcp::endpoint ep(addr, i.opts.port);
  i.acceptor.open(ep.protocol(), ec);
  if (!ec) i.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) i.acceptor.bind(ep, ec);
  if (!ec) i.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error("cannot listen on " + i.opts.host + ":" + std::to_string(i.opts.port) + ": " + ec.message());
  i.port = i.acceptor.local_endpoint().port();
  // As many states as sockets may be open, within what the descriptor limit leaves.
  rlimit rl{};
  i.state_limit = i.opts.max_connections + 64;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    i.state_limit =
        std::min<std::size_t>(i.state_limit, rl.rlim_cur > 512 ? static_cast<std::size_t>(rl.rlim_cur) - 512 : 0);
  i.reserve_descriptor_states(std::min(i.state_limit, kStateBlock));
  return i.port;
}

void HttpServer::Impl::reserve_descriptor_states(std::size_t upto) {
  // Asio's epoll reactor keeps the state of every socket it has seen (~150 bytes) in a free list for
  // reuse and never frees it. Allocated one per accepted connection, in between that connection's own
  // (larger, freed) allocations, those states pin one heap page per connection of a burst: 4 000 idle
  // connections kept ~15 MiB after they closed, whatever malloc_trim did. Made a block at a time, ahead
  // of the connections (sockets opened and closed now), they sit together and the burst's pages can be
  // given back. (All of them at start cost ~0.7 MiB of RSS that an agent with a few clients never used.)
  std::vector<tcp::socket> held;
  held.reserve(upto > reserved_states ? upto - reserved_states : 0);
  while (reserved_states < upto) {
    tcp::socket s(ioc);
    beast::error_code ec;
    s.open(tcp::v4(), ec);
    if (ec) {
      state_limit = reserved_states;  // out of descriptors: no more blocks
      break;
    }
    held.push_back(std::move(s));
    ++reserved_states;
  }
  for (auto& s : held) {
    beast::error_code ec;
    s.close(ec);
  }
}

void HttpServer::Impl::reserve_ahead() {
  const std::size_t open = connections.load() + (ws ? ws->clients() : 0) + 64;  // + handshakes, timers' fds
  if (open >= reserved_states && reserved_states < state_limit)
    reserve_descriptor_states(std::min(state_limit, reserved_states + kStateBlock));
}

void HttpServer::run(bool handle_signals) {
  auto& i = *impl_;
  if (handle_signals) {
    i.signals.add(SIGINT);
    i.signals.add(SIGTERM);
    i.signals.async_wait([self = impl_](beast::error_code ec, int) {
      if (!ec) self->drain();
    });
  }
  i.accept();
  i.start_trim_timer();
  i.start_sio_timer();
  i.ioc.run();
  i.finish();
}

void HttpServer::stop() {
  asio::post(impl_->ioc, [self = impl_] { self->drain(); });
}

void HttpServer::Impl::drain() {
  if (draining) return;
  begin_drain();
  auto timer = std::make_shared<asio::steady_timer>(ioc);
  check_drained(timer, std::chrono::steady_clock::now() + opts.drain_timeout);
}

void HttpServer::Impl::check_drained(std::shared_ptr<asio::steady_timer> timer,
                                     std::chrono::steady_clock::time_point deadline) {
  if (connections.load() == 0 || std::chrono::steady_clock::now() >= deadline) {
    ioc.stop();
    return;
  }
  timer->expires_after(std::chrono::milliseconds(20));
  timer->async_wait(
      [self = shared_from_this(), timer, deadline](beast::error_code) { self->check_drained(timer, deadline); });
}

void HttpServer::Impl::finish() {
  if (sio) sio->close_all();
  if (ws) ws->close_all();  // no more messages are posted to sessions from the collection loop
  draining = true;
  beast::error_code ignored;
  acceptor.close(ignored);
  signals.cancel(ignored);
  ioc.restart();
  for (auto& w : http_sessions)
    if (auto s = w.lock()) s->force_close();
  for (auto& w : ws_sessions)
    if (auto s = w.lock()) s->force_close();
  for (auto& w : sio_ws_sessions)
    if (auto s = w.lock()) s->force_close();
  pool.join();  // blocking handlers still running post their replies, which fail on closed sockets
  fresh_pool.join();
  ioc.poll();  // every completion runs: the sessions (and their references to us) are released
  http_sessions.clear();
  ws_sessions.clear();
  sio_ws_sessions.clear();
}

std::size_t HttpServer::connections() const { return impl_->connections.load(); }

}  // namespace gf::server
