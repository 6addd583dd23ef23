#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/text.hpp"
#include "launch/api_version.hpp"
#include "launch/docker.hpp"
#include "launch/log_demux.hpp"
#include "platform/http_client.hpp"

namespace gf::launch {
namespace {

using json = nlohmann::json;
using platform::HttpRequest;
using platform::HttpResponse;
using platform::TransportFailure;
using platform::url_escape;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Requests the engine answers at once still get a limit, so a wedged engine cannot hang gpufleet.
// create can take seconds on a slow disk (it prepares the container's layer); start sets up devices.
constexpr milliseconds kQuickTimeout = seconds(30);
constexpr milliseconds kCreateStartTimeout = seconds(120);
// Reading a finished container's whole log; only the tail is kept, but all of it crosses the socket.
constexpr milliseconds kLogsTimeout = seconds(600);
// stop blocks for the grace period and then for the kill; this is the slack on top of the grace.
constexpr seconds kStopSlack = seconds(30);

std::string short_id(const std::string& id) { return id.substr(0, 12); }

// One request to the engine over its unix socket (the URL's host is ignored there), on a connection of
// its own: calls from different threads are independent. No cap on the body: log streams go through
// on_body, and the other answers are small.
platform::HttpOutcome perform(const std::string& socket_path, HttpRequest req) {
  req.unix_socket = socket_path;
  req.max_body_bytes = 0;
  return platform::http_perform(req);
}

// Why no answer came, naming the socket, with what the user can do about the usual causes (no engine
// there, no permission on its socket).
Error docker_error(const std::string& socket_path, const platform::TransportError& e) {
  switch (e.kind) {
    case TransportFailure::Cancelled: return make_error("docker: cancelled");
    case TransportFailure::Unreachable: {
      const std::string reason = e.os_errno != 0
                                     ? std::error_code(static_cast<int>(e.os_errno), std::generic_category()).message()
                                     : e.message;
      std::string hint;
      if (e.os_errno == ENOENT || e.os_errno == ECONNREFUSED)
        hint = " (is the Docker engine running? set DOCKER_HOST=unix:///path/to/docker.sock if it listens elsewhere)";
      else if (e.os_errno == EACCES || e.os_errno == EPERM)
        hint = " (add your user to the 'docker' group, or run as root)";
      return make_error(fmt::format("cannot reach the Docker engine at {}: {}{}", socket_path, reason, hint));
    }
    case TransportFailure::TimedOut: return make_error(fmt::format("docker: request {}", e.message));
    default: break;
  }
  if (e.message.starts_with("libcurl") || e.message.find("libcurl4") != std::string::npos)
    return make_error("docker: " + e.message);
  return make_error(fmt::format("docker: request to the engine at {} failed: {}", socket_path, e.message));
}

std::string first_line(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  s = s.substr(0, s.find_first_of("\r\n"));
  constexpr std::size_t kMax = 300;
  return s.size() > kMax ? std::string(s.substr(0, kMax)) + "…" : std::string(s);
}

// The engine's error body is {"message": "..."}; anything else (a proxy's HTML, say) is shown as text.
std::string engine_message(const HttpResponse& r) {
  const auto parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.contains("message") && parsed["message"].is_string()) {
    return first_line(parsed["message"].get<std::string>());
  }
  const auto text = first_line(r.body);
  return text.empty() ? "(empty response)" : text;
}

// What the user can do about the errors people actually hit when running GPU containers.
std::string hint_for(std::string_view message) {
  constexpr std::string_view kNoSuchImage = "No such image: ";
  if (message.starts_with(kNoSuchImage)) {
    return fmt::format(" (run `docker pull {}` first)", message.substr(kNoSuchImage.size()));
  }
  if (message.find("could not select device driver") != std::string_view::npos) {
    return " (install the NVIDIA Container Toolkit and restart the Docker engine)";
  }
  return {};
}

Error engine_error(const HttpResponse& r) {
  const auto message = engine_message(r);
  return make_error(fmt::format("docker: {} {}{}", r.status, message, hint_for(message)));
}

// The seed's rule (shared/seeds/gpu-resource-tracking.md, "Docker Integration"): do NOT set
// CUDA_VISIBLE_DEVICES when using device_requests — the device request already limits what the container
// sees, and CUDA would then renumber an already-filtered set (device=2 is index 0 inside; "2" would hide
// it). NVIDIA_VISIBLE_DEVICES goes too: with --gpus the engine sets it itself from DeviceIDs, and a
// user-supplied one must not widen the allocation.
bool is_gpu_visibility_variable(std::string_view entry) {
  const auto key = entry.substr(0, entry.find('='));
  return key == "CUDA_VISIBLE_DEVICES" || key == "NVIDIA_VISIBLE_DEVICES";
}

}  // namespace

std::string create_request_body(const DockerRunSpec& spec) {
  json env = json::array();
  for (const auto& e : spec.env) {
    if (!is_gpu_visibility_variable(e)) env.push_back(e);
  }
  json body = {
      {"Image", spec.image},
      {"Env", std::move(env)},
      {"Labels", spec.labels},
      // No TTY: the logs then come multiplexed, so stdout and stderr stay apart and binary output is safe.
      {"Tty", false},
      {"OpenStdin", false},
  };
  if (!spec.cmd.empty()) body["Cmd"] = spec.cmd;  // absent, not [], so the image's CMD applies
  json host = json::object();
  if (!spec.binds.empty()) host["Binds"] = spec.binds;
  if (!spec.ports.empty()) {
    json exposed = json::object(), bindings = json::object();
    for (const auto& p : spec.ports) {
      const std::string key = fmt::format("{}/tcp", p.container_port);
      exposed[key] = json::object();
      bindings[key].push_back({{"HostIp", p.host_ip}, {"HostPort", std::to_string(p.host_port)}});
    }
    body["ExposedPorts"] = std::move(exposed);
    host["PortBindings"] = std::move(bindings);
  }
  if (!spec.gpu_ids.empty()) {
    // Exactly what `docker run --gpus '"device=0,1"'` sends: Count 0 because DeviceIDs picks them.
    host["DeviceRequests"] = json::array({{
        {"Driver", ""},
        {"Count", 0},
        {"DeviceIDs", spec.gpu_ids},
        {"Capabilities", json::array({json::array({"gpu"})})},
    }});
  }
  body["HostConfig"] = std::move(host);
  return body.dump();
}

Result<std::string> parse_bind(std::string_view text) {
  const std::string t(text);
  auto bad = [&](std::string_view why) {
    return make_error(ErrorKind::Usage,
                      fmt::format("volume '{}': {} (expected HOST_PATH:CONTAINER_PATH[:ro])", t, why));
  };
  if (std::any_of(t.begin(), t.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return bad("control characters");
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto colon = t.find(':', start);
    parts.push_back(t.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) return bad("two or three parts separated by ':'");
  if (parts[0].empty() || parts[0].front() != '/') return bad("the host path must be absolute");
  if (parts[1].empty() || parts[1].front() != '/') return bad("the container path must be absolute");
  if (parts.size() == 3 && parts[2] != "ro" && parts[2] != "rw") return bad("the mode must be ro or rw");
  return t;
}

Result<DockerRunSpec::Port> parse_port(std::string_view text) {
  const std::string t(text);
  auto bad = [&](std::string_view why) {
    return make_error(ErrorKind::Usage, fmt::format("port '{}': {} (expected [IP:]HOST_PORT:CONTAINER_PORT)", t, why));
  };
  const auto last = t.rfind(':');
  if (last == std::string::npos) return bad("no ':'");
  const auto prev = last == 0 ? std::string::npos : t.rfind(':', last - 1);
  const std::string host_part = prev == std::string::npos ? t.substr(0, last) : t.substr(prev + 1, last - prev - 1);
  auto number = [](const std::string& s) -> std::optional<unsigned> {
    const auto v = core::parse_uint(s, 1, 65535);
    return v ? std::optional<unsigned>(static_cast<unsigned>(*v)) : std::nullopt;
  };
  const auto hp = number(host_part), cp = number(t.substr(last + 1));
  if (!hp || !cp) return bad("ports are numbers from 1 to 65535");
  DockerRunSpec::Port p;
  p.host_port = *hp;
  p.container_port = *cp;
  if (prev != std::string::npos) {
    p.host_ip = t.substr(0, prev);
    if (p.host_ip.empty() || p.host_ip.find_first_not_of("0123456789abcdefABCDEF.:[]") != std::string::npos)
      return bad("the address must be an IP address");
  }
  return p;
}

DockerClient::DockerClient(std::string socket_path) : socket_path_(std::move(socket_path)) {}

Result<DockerClient> DockerClient::from_environment() {
  const char* host = std::getenv("DOCKER_HOST");
  return from_docker_host(host != nullptr ? host : "");
}

Result<DockerClient> DockerClient::from_docker_host(std::string_view docker_host) {
  if (docker_host.empty()) return DockerClient();
  constexpr std::string_view kUnix = "unix://";
  if (docker_host.starts_with(kUnix) && docker_host.size() > kUnix.size()) {
    return DockerClient(std::string(docker_host.substr(kUnix.size())));
  }
  return make_error(
      fmt::format("DOCKER_HOST={} is not supported: gpufleet reaches the Docker engine over a unix socket only "
                  "(DOCKER_HOST=unix:///path/to/docker.sock)",
                  docker_host));
}

std::string DockerClient::url(std::string_view path_and_query) const {
  return fmt::format("http://localhost/v{}{}", api_version_, path_and_query);
}

Result<std::string> DockerClient::ping() {
  HttpRequest req;
  req.url = "http://localhost/_ping";  // unversioned: it must work before we know what the engine speaks
  req.timeout = kQuickTimeout;
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) return docker_error(socket_path_, out.error());
  const auto& r = out.response();
  if (r.status != 200) return engine_error(r);
  if (first_line(r.body) != "OK") {
    return make_error(fmt::format("docker: {} does not answer like a Docker engine (/_ping said \"{}\")", socket_path_,
                                  first_line(r.body)));
  }
  const std::string engine_api = r.header("api-version");
  const auto engine = parse_api_version(engine_api);
  if (!engine) return api_version_;  // every engine since 1.x sends Api-Version; keep the safe default
  const auto oldest = *parse_api_version(kOldestApiVersion);
  if (*engine < oldest) {
    return make_error(fmt::format("docker: the engine at {} speaks API {}; gpufleet needs {} or newer (Docker 20.10+)",
                                  socket_path_, engine_api, kOldestApiVersion));
  }
  const auto newest = *parse_api_version(kNewestApiVersion);
  const auto chosen = std::min(*engine, newest);
  api_version_ = fmt::format("{}.{}", chosen.first, chosen.second);
  return api_version_;
}

Result<DockerClient::Created> DockerClient::create_container(const DockerRunSpec& spec) {
  if (spec.image.empty()) return make_error("docker: no image given");
  for (const auto& g : spec.gpu_ids) {
    if (g.empty()) return make_error("docker: empty GPU id in the device request");
  }
  HttpRequest req;
  req.method = "POST";
  req.url =
      url(spec.name.empty() ? std::string("/containers/create") : "/containers/create?name=" + url_escape(spec.name));
  req.body = create_request_body(spec);
  req.timeout = kCreateStartTimeout;
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) return docker_error(socket_path_, out.error());
  const auto& r = out.response();
  if (r.status != 201) return engine_error(r);
  const auto parsed = json::parse(r.body, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("Id") || !parsed["Id"].is_string() ||
      parsed["Id"].get<std::string>().empty()) {
    return make_error(fmt::format("docker: create answered without a container id: {}", first_line(r.body)));
  }
  Created c{parsed["Id"].get<std::string>(), {}};
  if (parsed.contains("Warnings") && parsed["Warnings"].is_array()) {
    for (const auto& w : parsed["Warnings"]) {
      if (w.is_string() && !w.get<std::string>().empty()) c.warnings.push_back(w.get<std::string>());
    }
  }
  return c;
}

Result<std::string> DockerClient::create(const DockerRunSpec& spec) {
  auto c = create_container(spec);
  if (!c) return c.error();
  return std::move(c->id);
}

Result<void> DockerClient::start(const std::string& id) {
  HttpRequest req;
  req.method = "POST";
  req.url = url("/containers/" + url_escape(id) + "/start");
  req.timeout = kCreateStartTimeout;
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) return docker_error(socket_path_, out.error());
  const auto& r = out.response();
  if (r.status == 204 || r.status == 304) return {};  // 304: already running, which is what we wanted
  return engine_error(r);
}

Result<int> DockerClient::wait(const std::string& id, std::optional<milliseconds> timeout) {
  return wait_until(id, timeout, nullptr);
}

Result<int> DockerClient::wait_until(const std::string& id, std::optional<milliseconds> timeout,
                                     const std::atomic<bool>* cancel) {
  // condition=not-running (the default) answers at once for a container that has already exited, so
  // calling this after start() cannot miss a short-lived container (we never set AutoRemove).
  HttpRequest req;
  req.method = "POST";
  req.url = url("/containers/" + url_escape(id) + "/wait");
  req.timeout = timeout;
  req.cancel = cancel;
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) {
    const auto& e = out.error();
    if (e.kind == TransportFailure::TimedOut && timeout) {
      return make_error(
          fmt::format("docker: timed out after {} ms waiting for container {}", timeout->count(), short_id(id)));
    }
    if (e.kind == TransportFailure::Cancelled) {
      return make_error(fmt::format("docker: cancelled while waiting for container {}", short_id(id)));
    }
    return docker_error(socket_path_, e);
  }
  const auto& r = out.response();
  if (r.status != 200) return engine_error(r);
  const auto parsed = json::parse(r.body, nullptr, false);
  if (!parsed.is_object() || !parsed.contains("StatusCode") || !parsed["StatusCode"].is_number_integer()) {
    return make_error(fmt::format("docker: wait answered without a StatusCode: {}", first_line(r.body)));
  }
  // {"Error": {"Message": "..."}} is set when the engine could not determine the exit (e.g. it restarted).
  if (parsed.contains("Error") && parsed["Error"].is_object()) {
    const auto msg = parsed["Error"].value("Message", std::string());
    if (!msg.empty()) {
      return make_error(fmt::format("docker: waiting for container {} failed: {}", short_id(id), first_line(msg)));
    }
  }
  return static_cast<int>(parsed["StatusCode"].get<std::int64_t>());
}

Result<std::string> DockerClient::logs(const std::string& id, std::size_t tail_bytes) {
  std::optional<LogDemuxer> demux;  // made at the first chunk, once the Content-Type is known
  HttpRequest req;
  req.url = url("/containers/" + url_escape(id) + "/logs?stdout=1&stderr=1");
  req.timeout = kLogsTimeout;
  req.on_body = [&](std::string_view content_type, std::string_view chunk) {
    if (!demux) demux.emplace(framing_for(content_type, api_version_), tail_bytes);
    demux->feed(chunk);
  };
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) return docker_error(socket_path_, out.error());
  const auto& r = out.response();
  if (r.status != 200) return engine_error(r);
  return demux ? demux->finish() : std::string();
}

Result<void> DockerClient::stop(const std::string& id, int grace_seconds) {
  grace_seconds = std::max(grace_seconds, 0);
  HttpRequest req;
  req.method = "POST";
  req.url = url(fmt::format("/containers/{}/stop?t={}", url_escape(id), grace_seconds));
  req.timeout = seconds(grace_seconds) + kStopSlack;
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) return docker_error(socket_path_, out.error());
  const auto& r = out.response();
  if (r.status == 204 || r.status == 304) return {};  // 304: it had already stopped
  return engine_error(r);
}

Result<void> DockerClient::remove(const std::string& id, bool force) {
  HttpRequest req;
  req.method = "DELETE";
  // v=1 removes the container's anonymous volumes too, as `docker run --rm` does.
  req.url = url(fmt::format("/containers/{}?force={}&v=1", url_escape(id), force ? 1 : 0));
  req.timeout = kQuickTimeout;
  auto out = perform(socket_path_, std::move(req));
  if (!out.ok()) return docker_error(socket_path_, out.error());
  const auto& r = out.response();
  if (r.status == 204) return {};
  return engine_error(r);
}

Result<DockerRunResult> DockerClient::run(const DockerRunSpec& spec, std::atomic<bool>* cancel) {
  const auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };

  // Ping first: it picks the API version, and "cannot reach the engine" is clearer here than after create.
  if (auto v = ping(); !v) return v.error();
  if (cancelled()) return make_error("docker: cancelled before the container was created");

  // create and start are not aborted mid-request: a create cut off after the engine acted would leave a
  // container whose id we never learn. The flag is checked between steps instead.
  auto created = create_container(spec);
  if (!created) return created.error();
  DockerRunResult result;
  result.container_id = created->id;
  result.warnings = std::move(created->warnings);
  const auto sid = short_id(result.container_id);

  // Cleanup before the container ran: it never did anything worth inspecting, so it goes regardless of
  // spec.remove; a leftover would only collide with the next run's name.
  const auto discard = [&](std::string message) -> Error {
    if (auto rm = remove(result.container_id, /*force=*/true); !rm) {
      message += fmt::format("; removing container {} also failed: {}", sid, rm.error().message);
    }
    return make_error(std::move(message));
  };
  if (cancelled()) return discard("docker: cancelled before the container started");
  if (auto st = start(result.container_id); !st) return discard(st.error().message);

  auto code = wait_until(result.container_id, std::nullopt, cancel);
  if (!code) {
    // Cancelled, or the connection to the engine broke: either way the container may still hold the
    // GPUs, so stop it (SIGTERM, then SIGKILL after the grace period) rather than leave it running.
    std::string message = cancelled() ? fmt::format("docker: cancelled; container {}", sid)
                                      : fmt::format("{}; container {}", code.error().message, sid);
    const auto stopped = stop(result.container_id, spec.stop_grace_seconds);
    if (spec.remove) {
      // force: if stop failed, removing kills it too.
      const auto removed = remove(result.container_id, /*force=*/true);
      message += removed ? " stopped and removed" : fmt::format(" could not be removed: {}", removed.error().message);
    } else {
      message += stopped ? " stopped (kept: remove is off)"
                         : fmt::format(" could not be stopped: {}", stopped.error().message);
    }
    return make_error(std::move(message));
  }
  result.exit_code = *code;

  if (auto text = logs(result.container_id, kDefaultLogsTailBytes)) {
    result.logs_tail = std::move(*text);
  } else {
    result.warnings.push_back(fmt::format("could not read the logs of container {}: {}", sid, text.error().message));
  }
  if (spec.remove) {
    // force: harmless on an exited container, and it still succeeds if a restart policy brought it back.
    if (auto rm = remove(result.container_id, /*force=*/true); !rm) {
      result.warnings.push_back(fmt::format("could not remove container {}: {}", sid, rm.error().message));
    }
  }
  return result;
}

}  // namespace gf::launch
