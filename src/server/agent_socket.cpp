#include "server/agent_socket.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <variant>

#include "platform/fs.hpp"
#include "platform/log.hpp"
#include "platform/users.hpp"
#include "server/fair_queue.hpp"
#include "wire/agent_docs.hpp"
#include "wire/agent_protocol.hpp"
#include "wire/json.hpp"

namespace gf::server {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;
using nlohmann::json;

std::string default_agent_socket_path() {
  if (::geteuid() == 0) return "/run/gpufleet/agent.sock";
  if (auto x = platform::env("XDG_RUNTIME_DIR"); x && !x->empty()) return *x + "/gpufleet/agent.sock";
  return fmt::format("/tmp/gpufleet-{}/agent.sock", ::geteuid());
}

Result<void> prepare_socket_dir(const std::string& dir) {
  const mode_t mode = ::geteuid() == 0 ? 0755 : 0700;
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST)
    return make_error(fmt::format("cannot create the socket directory {}: {}", dir, std::strerror(errno)));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return make_error(fmt::format("cannot read the socket directory {}: {}", dir, std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    return make_error(ErrorKind::Permission, fmt::format("the socket directory {} is not a directory", dir));
  if (st.st_uid != ::geteuid())
    return make_error(ErrorKind::Permission,
                      fmt::format("the socket directory {} belongs to uid {}, not to this agent's uid {}", dir,
                                  st.st_uid, ::geteuid()));
  if ((st.st_mode & 022) != 0)
    return make_error(ErrorKind::Permission, fmt::format("the socket directory {} is writable by others (mode {:o})",
                                                         dir, st.st_mode & 07777));
  return {};
}

namespace {

// Removes a stale socket file of ours; refuses anything else at the path.
Result<void> clear_stale(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};  // nothing there
  if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid())
    return make_error(ErrorKind::Permission,
                      fmt::format("{} exists and is not a socket of this agent's user: not replaced", path));
  asio::io_context io;
  local::socket probe(io);
  boost::system::error_code ec;
  probe.connect(local::endpoint(path), ec);
  if (!ec) return make_error(ErrorKind::Unavailable, fmt::format("another agent already listens on {}", path));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return make_error(fmt::format("cannot remove the stale socket {}: {}", path, std::strerror(errno)));
  return {};
}

// The heavy reads' thread: tasks queued per uid and run one uid after another in turn (FairQueue), so a
// burst from one user delays another user's read by at most one read.
class ReadWorker {
 public:
  ReadWorker() : thread_([this] { run(); }) {}
  ~ReadWorker() { stop(); }
  ReadWorker(const ReadWorker&) = delete;
  ReadWorker& operator=(const ReadWorker&) = delete;

  void post(std::uint32_t uid, std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      queue_.push(uid, std::move(task));
    }
    cv_.notify_one();
  }
  // Finishes the task under way, drops the rest. Idempotent.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.pop()->second);
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  FairQueue<std::uint32_t, std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace

struct Session;

struct AgentSocket::Impl {
  node::Arbiter& arbiter;
  const Router* router;
  AgentSocketOptions options;
  asio::io_context io;
  local::acceptor acceptor{io};
  asio::steady_timer timer{io};
  std::thread thread;
  bool stopping = false;  // io thread only
  std::map<Session*, std::shared_ptr<Session>> sessions;
  std::map<std::uint32_t, std::size_t> per_uid;
  mutable std::mutex count_mu;
  std::size_t count = 0;
  bool stopped = false;
  // Bytes queued to each uid's connections and not yet taken by the kernel: charged by the I/O thread
  // when it queues a line and by the worker when it makes a reply (before the I/O thread queues it).
  std::mutex budget_mu;
  std::map<std::uint32_t, std::size_t> unsent_by_uid;
  ReadWorker reads;  // after io: its tasks post there

  Impl(node::Arbiter& a, const Router* r, AgentSocketOptions o) : arbiter(a), router(r), options(std::move(o)) {}
  void accept();
  void schedule_tick();
  void closed(Session* s);
  void charge(std::uint32_t uid, std::size_t n) {
    std::lock_guard lock(budget_mu);
    unsent_by_uid[uid] += n;
  }
  void discharge(std::uint32_t uid, std::size_t n) {
    if (n == 0) return;
    std::lock_guard lock(budget_mu);
    auto it = unsent_by_uid.find(uid);
    if (it == unsent_by_uid.end()) return;
    it->second -= std::min(n, it->second);
    if (it->second == 0) unsent_by_uid.erase(it);
  }
  std::size_t unsent_of(std::uint32_t uid) {
    std::lock_guard lock(budget_mu);
    auto it = unsent_by_uid.find(uid);
    return it == unsent_by_uid.end() ? 0 : it->second;
  }
};

namespace {

// A heavy read's reply line, made on the worker thread from what it may touch there: the arbiter and the
// router (both thread-safe), the options and the peer (copies).
std::string heavy_reply(AgentSocket::Impl& owner, const node::Peer& peer, std::int64_t id, const wire::AgentOp& op);

}  // namespace

// One client connection. Lives on the I/O thread; the arbiter's sink posts to it from any thread.
struct Session : std::enable_shared_from_this<Session> {
  AgentSocket::Impl& owner;
  local::socket socket;
  node::Peer peer;
  node::ConnectionId conn = 0;
  std::string inbuf;
  std::array<char, 8192> chunk{};
  std::deque<std::string> outbox;
  std::size_t unsent = 0;  // bytes in outbox, all charged to the uid
  bool writing = false;
  bool busy = false;     // a heavy read of ours is on the worker: the lines after it wait, and we read no more
  bool closing = false;  // close once the outbox is written
  bool closed = false;

  Session(AgentSocket::Impl& o, local::socket s) : owner(o), socket(std::move(s)) {}

  // charged: the worker already counted the line against the uid.
  void send(std::string line, bool charged = false) {
    if (closed) {
      if (charged) owner.discharge(peer.uid, line.size());
      return;
    }
    if (!charged) owner.charge(peer.uid, line.size());
    // A client is dropped when what it has not taken yet is already past the limit; one large reply
    // (a `jobs` list of big records) to a client that reads is always sent.
    const bool behind = unsent > owner.options.max_unsent_bytes;
    unsent += line.size();
    outbox.push_back(std::move(line));
    if (behind) {
      platform::log_line("agent-socket",
                         fmt::format("dropping {} (pid {}): it does not read its replies", peer.user, peer.pid));
      close();
      return;
    }
    write_next();
  }
  void write_next() {
    if (writing || closed) return;
    if (outbox.empty()) {
      if (closing) close();
      return;
    }
    writing = true;
    auto self = shared_from_this();
    asio::async_write(socket, asio::buffer(outbox.front()), [self](boost::system::error_code ec, std::size_t) {
      self->writing = false;
      if (self->closed) return;  // close() gave back what was unsent
      if (ec) return self->close();
      const std::size_t n = self->outbox.front().size();
      self->unsent -= n;
      self->owner.discharge(self->peer.uid, n);
      self->outbox.pop_front();
      self->write_next();
    });
  }
  void read() {
    if (closed || closing || busy) return;
    auto self = shared_from_this();
    socket.async_read_some(asio::buffer(chunk), [self](boost::system::error_code ec, std::size_t n) {
      if (ec) return self->close();
      self->inbuf.append(self->chunk.data(), n);
      self->serve_lines();
    });
  }
  // Answers the complete lines in inbuf, in order, until one is a heavy read (then done() comes back
  // here), then reads on.
  void serve_lines() {
    std::size_t start = 0;
    while (!busy) {
      const auto nl = inbuf.find('\n', start);
      if (nl == std::string::npos) break;
      const std::string_view line = std::string_view(inbuf).substr(start, nl - start);
      start = nl + 1;
      handle(line);
      if (closing || closed) return;
    }
    inbuf.erase(0, start);
    if (busy) return;
    if (inbuf.size() > wire::kMaxRequestLine) {
      send(wire::error_line(
          std::nullopt,
          make_error(ErrorKind::Invalid, fmt::format("the request is longer than {} bytes", wire::kMaxRequestLine))));
      closing = true;
      write_next();
      return;
    }
    read();
  }
  // The worker's reply to our heavy read (charged to the uid already).
  void done(std::string line) {
    send(std::move(line), true);
    busy = false;
    if (!closed && !closing) serve_lines();
  }
  void close() {
    if (closed) return;
    closed = true;
    owner.discharge(peer.uid, unsent);
    unsent = 0;
    boost::system::error_code ec;
    socket.close(ec);
    owner.closed(this);
  }
  void handle(std::string_view line);
  // Queues a heavy read on the worker, or refuses it when the uid has too much unread.
  void heavy(std::int64_t id, wire::AgentOp op);
};

namespace {

// The arbiter's voice on one connection: it posts lines to the I/O thread (it is called under the
// arbiter's lock, from any thread).
class Sink final : public node::ConnectionSink {
 public:
  Sink(asio::io_context& io, std::weak_ptr<Session> s) : io_(io), s_(std::move(s)) {}
  void granted(std::int64_t id, const scheduler::Allocation& a) override {
    post(wire::ok_line(
        id, wire::acquire_result_json(a.lease, a.selection, *a.snapshot, static_cast<unsigned>(a.lease.gpus.size()))));
  }
  void refused(std::int64_t id, const Error& e) override { post(wire::error_line(id, e)); }
  void waiting(std::int64_t id, const node::WaitingEvent& e) override {
    post(wire::waiting_line(id, std::chrono::duration<double>(e.waited).count(), e.why, e.ahead, e.holders));
  }
  void lease_ended(const std::string& lease, const std::string& reason) override {
    post(wire::lease_ended_line(lease, reason));
  }
  void lease_warning(const std::string& lease, const std::string& message) override {
    post(wire::lease_warning_line(lease, message));
  }

 private:
  void post(std::string line) {
    asio::post(io_, [w = s_, line = std::move(line)]() mutable {
      if (auto s = w.lock()) s->send(std::move(line));
    });
  }
  asio::io_context& io_;
  std::weak_ptr<Session> s_;
};

// Under --auth-read a non-admin reads only their own records (issue 20, finding 6): rows whose owner
// uid is another's (or unknown) are left out.
template <class T>
void keep_own(std::vector<T>& rows, std::uint32_t uid) {
  std::erase_if(rows, [uid](const T& r) { return !r.owner.uid || *r.owner.uid != uid; });
}

// A read-only REST route answered on the socket: {status, body}, or why it is not served here.
Result<json> serve_get(const AgentSocket::Impl& owner, const node::Peer& peer, const std::string& target) {
  if (!owner.router) return make_error(ErrorKind::Unsupported, "this agent serves no REST routes on its socket");
  Request req;
  req.method = Method::Get;
  req.target = target;
  const auto q = target.find('?');
  if (!url_decode(std::string_view(target).substr(0, q), req.path, false) ||
      (q != std::string::npos && !parse_query(std::string_view(target).substr(q + 1), req.query)))
    return make_error(ErrorKind::Invalid, "malformed path or query");
  // A fresh driver query would hold the worker (and every user's reads) for as long as the driver takes.
  if (wants_fresh(req))
    return make_error(ErrorKind::Unsupported, "fresh readings are served by the HTTP API, not the socket");
  auto m = owner.router->match(req);
  if (!m.route) return make_error(ErrorKind::NotFound, "no such route: " + req.path);
  if (m.route->access != Access::Read)
    return make_error(ErrorKind::Permission, "only read-only routes are served through get");
  // An agent whose reads need the token (--auth-read) serves them on its socket to admins only.
  if (owner.options.auth_read && !peer.admin)
    return make_error(ErrorKind::Permission,
                      "this agent's reads need its token (auth_read): only root or the "
                      "admin group may read through the socket");
  const Response resp = invoke(*m.route, req);
  return wire::get_result_json(resp.status, resp.body ? std::optional<std::string_view>(*resp.body) : std::nullopt);
}

std::string heavy_reply(AgentSocket::Impl& owner, const node::Peer& peer, std::int64_t id, const wire::AgentOp& op) {
  node::Arbiter& a = owner.arbiter;
  const bool own_only = owner.options.auth_read && !peer.admin;
  const std::size_t cap = owner.options.max_reply_bytes;
  Result<json> result = json::object();
  if (const auto* jobs = std::get_if<wire::JobsArgs>(&op)) {
    core::JobQuery q;
    q.limit = jobs->limit;
    if (own_only) q.uid = peer.uid;  // their newest `limit`, found by the store
    q.max_bytes = cap;
    auto page = a.jobs_page(q);
    if (!page) {
      result = page.error();
    } else {
      json r = wire::jobs_result_json(page->jobs);
      if (page->truncated) r["truncated"] = true;
      result = std::move(r);
    }
  } else if (const auto* one = std::get_if<wire::JobArgs>(&op)) {
    auto r = a.job(one->id);
    if (!r)
      result = r.error();
    else if (!*r)
      result = make_error(ErrorKind::NotFound, "no job " + one->id);
    else if (own_only && (!(*r)->owner.uid || *(*r)->owner.uid != peer.uid))
      result = make_error(ErrorKind::Permission, "job " + one->id +
                                                     " is another user's; this agent's reads need its token "
                                                     "(auth_read): only root or the admin group may read others' jobs");
    else
      result = wire::job_result_json(**r);
  } else if (const auto* get = std::get_if<wire::GetArgs>(&op)) {
    result = serve_get(owner, peer, get->path);
  }
  if (!result) return wire::error_line(id, result.error());
  std::string line = wire::ok_line(id, std::move(*result));
  if (line.size() > cap + 4096)  // a `jobs` list's first record may pass the cap by its own envelope
    return wire::error_line(
        id,
        make_error(ErrorKind::Invalid, fmt::format("the reply would be {} bytes, more than the socket's {}: ask for "
                                                   "less (a smaller limit), or over the HTTP API",
                                                   line.size(), cap)));
  return line;
}

}  // namespace

namespace {

// The refusal of a heavy read while the uid's replies not yet read are over its budget, or nullopt.
std::optional<std::string> over_budget(AgentSocket::Impl& owner, std::uint32_t uid, std::int64_t id) {
  const std::size_t unread = owner.unsent_of(uid);
  if (unread <= owner.options.max_unsent_per_uid) return std::nullopt;
  return wire::error_line(
      id, make_error(ErrorKind::Unavailable, fmt::format("your connections have {} bytes of replies they have not read "
                                                         "(at most {} per user): read them or close those connections",
                                                         unread, owner.options.max_unsent_per_uid)));
}

}  // namespace

void Session::heavy(std::int64_t id, wire::AgentOp op) {
  if (auto refused = over_budget(owner, peer.uid, id)) return send(std::move(*refused));
  busy = true;
  AgentSocket::Impl* o = &owner;
  owner.reads.post(peer.uid, [o, w = weak_from_this(), peer = peer, id, op = std::move(op)] {
    // Again here: the reads queued before this one have been answered and charged by now.
    auto refused = over_budget(*o, peer.uid, id);
    std::string line = refused ? std::move(*refused) : heavy_reply(*o, peer, id, op);
    o->charge(peer.uid, line.size());
    asio::post(o->io, [o, w, uid = peer.uid, line = std::move(line)]() mutable {
      if (auto s = w.lock())
        s->done(std::move(line));
      else
        o->discharge(uid, line.size());
    });
  });
}

void Session::handle(std::string_view text) {
  auto req = wire::parse_agent_request(text);
  if (!req.op) {
    send(wire::error_line(req.id, req.op.error()));
    if (req.close) {
      closing = true;
      write_next();
    }
    return;
  }
  const std::int64_t id = *req.id;
  node::Arbiter& a = owner.arbiter;
  auto fail = [&](const Error& e) { send(wire::error_line(id, e)); };
  const bool own_only = owner.options.auth_read && !peer.admin;
  std::visit(
      [&](auto& op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, wire::AcquireArgs>) {
          auto r = a.acquire(conn, id, op);
          if (!r) return fail(r.error());
          if (*r)
            send(wire::ok_line(id, wire::acquire_result_json((*r)->lease, (*r)->selection, *(*r)->snapshot,
                                                             static_cast<unsigned>((*r)->lease.gpus.size()))));
          // queued: the answer comes through the sink
        } else if constexpr (std::is_same_v<T, wire::CancelArgs>) {
          auto r = a.cancel(conn, op.target);
          if (!r) return fail(r.error());
          send(wire::ok_line(id));
        } else if constexpr (std::is_same_v<T, wire::ReleaseArgs>) {
          auto r = a.release(peer, op.lease);
          if (!r) return fail(r.error());
          send(wire::ok_line(id));
        } else if constexpr (std::is_same_v<T, wire::LeasesArgs>) {
          auto l = a.leases(op.all);
          if (!l) return fail(l.error());
          auto w = a.waiting();
          if (own_only) {
            keep_own(*l, peer.uid);
            keep_own(w, peer.uid);
          }
          send(wire::ok_line(id, wire::leases_result_json(*l, w)));
        } else if constexpr (std::is_same_v<T, wire::JobPutArgs>) {
          auto r = a.job_put(peer, op.job);
          if (!r) return fail(r.error());
          send(wire::ok_line(id, wire::job_put_result_json(*r)));
        } else {  // jobs, job, get: on the worker
          heavy(id, std::move(op));
        }
      },
      *req.op);
}

void AgentSocket::Impl::closed(Session* s) {
  auto it = sessions.find(s);
  if (it == sessions.end()) return;
  auto keep = it->second;  // alive until this returns
  sessions.erase(it);
  if (--per_uid[s->peer.uid] == 0) per_uid.erase(s->peer.uid);
  {
    std::lock_guard lock(count_mu);
    --count;
  }
  // The client is gone: its connection-tied leases end now, not when someone next looks.
  if (!stopping && s->conn != 0) arbiter.disconnect(s->conn);
}

void AgentSocket::Impl::accept() {
  acceptor.async_accept([this](boost::system::error_code ec, local::socket sock) {
    if (ec) {
      if (ec != asio::error::operation_aborted && !stopping) accept();
      return;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(sock.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      accept();
      return;  // no credentials, no service
    }
    auto s = std::make_shared<Session>(*this, std::move(sock));
    s->peer.uid = cred.uid;
    s->peer.gid = cred.gid;
    s->peer.pid = static_cast<std::uint32_t>(cred.pid);
    s->peer.user = platform::user_name(cred.uid);
    s->peer.admin = cred.uid == 0 || platform::user_in_group(cred.uid, options.admin_group);
    std::size_t total = 0;
    {
      std::lock_guard lock(count_mu);
      total = count;
    }
    const bool over = total >= options.max_connections || per_uid[cred.uid] >= options.max_per_uid;
    sessions[s.get()] = s;
    ++per_uid[cred.uid];
    {
      std::lock_guard lock(count_mu);
      ++count;
    }
    if (over) {
      s->send(wire::error_line(
          std::nullopt, make_error(ErrorKind::Unavailable, fmt::format("too many connections (at most {} per user, "
                                                                       "{} in all)",
                                                                       options.max_per_uid, options.max_connections))));
      s->closing = true;
      s->write_next();
    } else {
      s->conn = arbiter.connect(s->peer, std::make_shared<Sink>(io, s));
      s->send(
          wire::greeting_line({s->peer.uid, s->peer.gid, s->peer.pid, s->peer.user, s->peer.admin}, options.version));
      s->read();
    }
    accept();
  });
}

void AgentSocket::Impl::schedule_tick() {
  const auto next = arbiter.tick();
  // The arbiter names when it next has work; watched processes are looked at every 250 ms anyway.
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::steady_clock::now());
  wait = std::clamp(wait, std::chrono::milliseconds(10), std::chrono::milliseconds(250));
  timer.expires_after(wait);
  timer.async_wait([this](boost::system::error_code ec) {
    if (!ec && !stopping) schedule_tick();
  });
}

Result<std::unique_ptr<AgentSocket>> AgentSocket::start(node::Arbiter& arbiter, const Router* router,
                                                        AgentSocketOptions options) {
  if (options.path.empty()) options.path = default_agent_socket_path();
  if (options.path.size() >= sizeof(sockaddr_un{}.sun_path))
    return make_error(ErrorKind::Invalid, fmt::format("the socket path {} is too long", options.path));
  const auto slash = options.path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : options.path.substr(0, slash);
  if (auto d = prepare_socket_dir(dir); !d) return d.error();
  if (auto c = clear_stale(options.path); !c) return c.error();
  auto impl = std::make_unique<Impl>(arbiter, router, std::move(options));
  boost::system::error_code ec;
  const std::string& path = impl->options.path;
  impl->acceptor.open(local(), ec);
  if (!ec) impl->acceptor.bind(local::endpoint(path), ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(fmt::format("cannot listen on {}: {}", path, ec.message()));
  // Anyone may connect to root's socket: identity comes from SO_PEERCRED, not from the file's mode.
  if (::chmod(path.c_str(), ::geteuid() == 0 ? 0666 : 0600) != 0)
    return make_error(fmt::format("cannot set the mode of {}: {}", path, std::strerror(errno)));
  Impl* p = impl.get();
  asio::post(p->io, [p] {
    p->accept();
    p->schedule_tick();
  });
  p->thread = std::thread([p] { p->io.run(); });
  return std::unique_ptr<AgentSocket>(new AgentSocket(std::move(impl)));
}

AgentSocket::AgentSocket(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AgentSocket::~AgentSocket() { stop(); }

void AgentSocket::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  Impl* p = impl_.get();
  p->reads.stop();  // the read under way ends first: it uses the arbiter and the router, which may go next
  asio::post(p->io, [p] {
    p->stopping = true;
    boost::system::error_code ec;
    p->acceptor.close(ec);
    p->timer.cancel();
    auto all = p->sessions;
    for (auto& [raw, s] : all) s->close();
    p->io.stop();
  });
  if (p->thread.joinable()) p->thread.join();
  // Sessions closed above told the arbiter nothing; forget them on its side without ending leases
  // would need a separate call: their connection-tied leases end at the next start ("agent restarted").
  ::unlink(p->options.path.c_str());
}

const std::string& AgentSocket::path() const noexcept { return impl_->options.path; }

std::size_t AgentSocket::connections() const {
  std::lock_guard lock(impl_->count_mu);
  return impl_->count;
}

}  // namespace gf::server
