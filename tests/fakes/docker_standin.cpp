// The stand-in Docker engine (see docker_standin.hpp). The only translation unit with Beast in it.
#include "fakes/docker_standin.hpp"

#include <fmt/format.h>
#include <stdlib.h>  // mkdtemp

// Boost 1.74's HTTP parser trips GCC 12's -Wmaybe-uninitialized on a boost::optional under
// -fsanitize=address (a false positive in basic_parser.hpp); it is not our code to fix.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <utility>

namespace gf::fakes {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using unix_stream = asio::local::stream_protocol;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Response = http::response<http::string_body>;

// How often a pending /wait looks at its container again; well under the client's 50 ms poll.
constexpr auto kWaitPoll = std::chrono::milliseconds(5);

std::pair<int, int> version_of(std::string_view v) {
  const auto dot = v.find('.');
  if (dot == std::string_view::npos) return {0, 0};
  return {std::atoi(std::string(v.substr(0, dot)).c_str()), std::atoi(std::string(v.substr(dot + 1)).c_str())};
}

std::map<std::string, std::string> parse_query(std::string_view q) {
  std::map<std::string, std::string> out;
  while (!q.empty()) {
    const auto amp = q.find('&');
    const auto part = q.substr(0, amp);
    const auto eq = part.find('=');
    out[std::string(part.substr(0, eq))] = eq == std::string_view::npos ? "" : std::string(part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

bool truthy(const std::map<std::string, std::string>& q, const std::string& key) {
  const auto it = q.find(key);
  return it != q.end() && (it->second == "1" || it->second == "true" || it->second == "True");
}

// Ids look like the engine's: 64 hex digits, distinct in their first 12.
std::string make_id(int n) {
  std::uint64_t x = 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(n + 1);
  std::string id;
  for (int i = 0; i < 4; ++i) {
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    id += fmt::format("{:016x}", x);
  }
  return id;
}

}  // namespace

// Everything the io thread touches. Handlers run only on that thread; `mu` guards what the test thread
// reads through the accessors.
struct DockerStandin::Impl {
  struct Session;
  struct Container {
    std::string image;
    bool started = false;
    bool stopped = false;
    Clock::time_point started_at;
  };

  DockerStandinConfig config;
  std::string dir;
  std::string socket_path;
  asio::io_context ioc;
  unix_stream::acceptor acceptor{ioc};
  std::thread thread;

  mutable std::mutex mu;
  std::vector<StandinRequest> requests;
  std::map<std::string, Container> containers;
  int created = 0;

  void accept();

  bool exited(const Container& c) const {
    return c.stopped || (c.started && Clock::now() - c.started_at >= config.run_time);
  }
  bool running(const Container& c) const { return c.started && !exited(c); }

  Response reply(const http::request<http::string_body>& req, http::status status, std::string body,
                 std::string content_type = "application/json") const {
    Response res{status, req.version()};
    res.set(http::field::server, "gpufleet-docker-standin");
    res.set("Api-Version", config.api_version);
    if (!body.empty()) res.set(http::field::content_type, content_type);
    res.keep_alive(req.keep_alive());
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }
  Response error(const http::request<http::string_body>& req, int status, const std::string& message) const {
    return reply(req, static_cast<http::status>(status), json{{"message", message}}.dump() + "\n");
  }

  std::string logs_body() const {
    std::string out;
    for (const auto& f : config.logs) {
      if (config.tty) {
        out += f.text;
        continue;
      }
      const auto n = static_cast<std::uint32_t>(f.text.size());
      out.push_back(static_cast<char>(f.stream));
      out.append(3, '\0');
      for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xFF));
      out += f.text;
    }
    return out;
  }

  // Answers `req`, or returns nullopt with *wait_for set when the answer must wait for a container to exit.
  std::optional<Response> route(const http::request<http::string_body>& req, std::string* wait_for);
  std::optional<Response> wait_reply(const http::request<http::string_body>& req, const std::string& id);
};

struct DockerStandin::Impl::Session : std::enable_shared_from_this<Session> {
  Session(Impl& impl, unix_stream::socket socket)
      : impl(impl), socket(std::move(socket)), timer(this->socket.get_executor()) {}

  void read() {
    req = {};
    http::async_read(socket, buffer, req, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec) self->handle();
    });
  }

  void handle() {
    std::string wait_for;
    auto res = impl.route(req, &wait_for);
    if (!res) res = impl.wait_reply(req, wait_for);  // a container that already exited answers at once
    if (res) {
      write(std::move(*res));
    } else {
      poll(wait_for);
    }
  }

  // A blocking /wait answers when the container exits; the timer keeps the io thread free meanwhile,
  // so stop and delete from other connections are served while a wait is pending.
  void poll(const std::string& id) {
    timer.expires_after(kWaitPoll);
    timer.async_wait([self = shared_from_this(), id](beast::error_code ec) {
      if (ec) return;
      if (auto res = self->impl.wait_reply(self->req, id)) {
        self->write(std::move(*res));
      } else {
        self->poll(id);
      }
    });
  }

  void write(Response r) {
    res = std::move(r);  // kept in the session: it must outlive async_write
    http::async_write(socket, res, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      if (self->res.need_eof()) {
        beast::error_code ignored;
        self->socket.shutdown(unix_stream::socket::shutdown_send, ignored);
        return;
      }
      self->read();
    });
  }

  Impl& impl;
  unix_stream::socket socket;
  asio::steady_timer timer;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  Response res;
};

void DockerStandin::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, unix_stream::socket socket) {
    if (ec) return;  // closed: the stand-in is stopping
    std::make_shared<Session>(*this, std::move(socket))->read();
    accept();
  });
}

std::optional<Response> DockerStandin::Impl::wait_reply(const http::request<http::string_body>& req,
                                                        const std::string& id) {
  std::lock_guard lock(mu);
  const auto it = containers.find(id);
  if (it == containers.end()) return error(req, 404, "No such container: " + id);
  // condition=not-running: a container never started counts as not running, with status 0.
  if (it->second.started && !exited(it->second)) return std::nullopt;
  const int code = !it->second.started ? 0 : it->second.stopped ? 137 : config.exit_code;
  return reply(req, http::status::ok, json{{"StatusCode", code}, {"Error", nullptr}}.dump() + "\n");
}

std::optional<Response> DockerStandin::Impl::route(const http::request<http::string_body>& req, std::string* wait_for) {
  const std::string target(req.target());
  const auto qpos = target.find('?');
  std::string path = target.substr(0, qpos);
  const auto query =
      parse_query(qpos == std::string::npos ? std::string_view() : std::string_view(target).substr(qpos + 1));
  std::string version;
  if (path.size() > 2 && path[0] == '/' && path[1] == 'v' && std::isdigit(static_cast<unsigned char>(path[2]))) {
    const auto slash = path.find('/', 1);
    version = path.substr(2, slash == std::string::npos ? std::string::npos : slash - 2);
    path = slash == std::string::npos ? "/" : path.substr(slash);
  }
  const std::string method(req.method_string());

  std::lock_guard lock(mu);
  requests.push_back({method, target, path, version, req.body()});

  if (!version.empty() && !config.min_api_version.empty() && version_of(version) < version_of(config.min_api_version)) {
    return error(req, 400,
                 fmt::format("client version {} is too old. Minimum supported API version is {}, please upgrade "
                             "your client to a newer version",
                             version, config.min_api_version));
  }
  if (!version.empty() && version_of(version) > version_of(config.api_version)) {
    return error(
        req, 400,
        fmt::format("client version {} is too new. Maximum supported API version is {}", version, config.api_version));
  }
  for (const auto& f : config.faults) {
    if (f.method == method && path.ends_with(f.path_suffix)) return error(req, f.status, f.message);
  }

  if (path == "/_ping" && (method == "GET" || method == "HEAD")) {
    return reply(req, http::status::ok, "OK", "text/plain; charset=utf-8");
  }
  if (path == "/containers/create" && method == "POST") {
    const auto body = json::parse(req.body(), nullptr, false);
    if (!body.is_object() || !body.contains("Image") || !body["Image"].is_string()) {
      return error(req, 400, "config cannot be empty in order to create a container");
    }
    const auto image = body["Image"].get<std::string>();
    // The engine names the reference it looked for, with the implied :latest.
    const auto last_slash = image.rfind('/');
    const auto name_start = last_slash == std::string::npos ? 0 : last_slash;
    const bool tagged = image.find_first_of(":@", name_start) != std::string::npos;
    const auto reference = tagged ? image : image + ":latest";
    if (config.missing_images.count(image) != 0 || config.missing_images.count(reference) != 0) {
      return error(req, 404, "No such image: " + reference);
    }
    const auto id = make_id(created++);
    containers[id] = Container{image, false, false, {}};
    return reply(req, http::status::created, json{{"Id", id}, {"Warnings", json::array()}}.dump() + "\n");
  }

  constexpr std::string_view kContainers = "/containers/";
  if (!path.starts_with(kContainers)) return error(req, 404, "page not found");
  const auto rest = std::string_view(path).substr(kContainers.size());
  const auto slash = rest.find('/');
  const std::string id(rest.substr(0, slash));
  const std::string action(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  const auto it = containers.find(id);
  if (it == containers.end()) return error(req, 404, "No such container: " + id);
  Container& c = it->second;

  if (action.empty() && method == "DELETE") {
    if (running(c) && !truthy(query, "force")) {
      return error(req, 409,
                   fmt::format("You cannot remove a running container {}. Stop the container before attempting "
                               "removal or force remove",
                               id));
    }
    containers.erase(it);
    return reply(req, http::status::no_content, "");
  }
  if (action == "start" && method == "POST") {
    if (c.started) return reply(req, http::status::not_modified, "");
    c.started = true;
    c.started_at = Clock::now();
    return reply(req, http::status::no_content, "");
  }
  if (action == "stop" && method == "POST") {
    if (!running(c)) return reply(req, http::status::not_modified, "");
    c.stopped = true;
    return reply(req, http::status::no_content, "");
  }
  if (action == "wait" && method == "POST") {
    *wait_for = id;
    return std::nullopt;  // wait_reply answers, now or after polling; the lock is released first
  }
  if (action == "logs" && method == "GET") {
    const auto type = config.label_multiplexed && !config.tty ? "application/vnd.docker.multiplexed-stream"
                                                              : "application/vnd.docker.raw-stream";
    return reply(req, http::status::ok, logs_body(), type);
  }
  return error(req, 404, "page not found");
}

DockerStandin::DockerStandin(DockerStandinConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  // A unix socket path must fit in sun_path (108 bytes), so the directory lives under /tmp when TMPDIR
  // is long.
  std::string base = std::filesystem::temp_directory_path().string();
  if (base.size() > 60) base = "/tmp";
  std::string tmpl = base + "/gf-docker-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("docker stand-in: mkdtemp failed in " + base);
  impl_->dir = tmpl;
  impl_->socket_path = tmpl + "/docker.sock";
  impl_->acceptor.open(unix_stream{});
  impl_->acceptor.bind(unix_stream::endpoint(impl_->socket_path));
  impl_->acceptor.listen();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

DockerStandin::~DockerStandin() {
  // Stop the loop, then join; pending sessions are destroyed with the io_context (Impl's first member
  // is destroyed last), after the thread that used them has gone.
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
  std::error_code fs_ignored;
  std::filesystem::remove_all(impl_->dir, fs_ignored);
}

const std::string& DockerStandin::socket_path() const { return impl_->socket_path; }

std::vector<StandinRequest> DockerStandin::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requests;
}

std::size_t DockerStandin::count(std::string_view method, std::string_view path_suffix) const {
  std::lock_guard lock(impl_->mu);
  std::size_t n = 0;
  for (const auto& r : impl_->requests) {
    if (r.method == method && std::string_view(r.path).ends_with(path_suffix)) ++n;
  }
  return n;
}

std::optional<std::string> DockerStandin::last_create_body() const {
  std::lock_guard lock(impl_->mu);
  for (auto it = impl_->requests.rbegin(); it != impl_->requests.rend(); ++it) {
    if (it->method == "POST" && it->path == "/containers/create") return it->body;
  }
  return std::nullopt;
}

std::vector<std::string> DockerStandin::live_containers() const {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> ids;
  for (const auto& [id, c] : impl_->containers) ids.push_back(id);
  return ids;
}

}  // namespace gf::fakes
