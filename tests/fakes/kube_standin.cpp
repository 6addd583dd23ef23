// The stand-in Kubernetes API server (see kube_standin.hpp). The only translation unit with Beast in it.
#include "fakes/kube_standin.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

// Boost 1.74's HTTP parser trips GCC 12's -Wmaybe-uninitialized on a boost::optional under
// -fsanitize=address (a false positive in basic_parser.hpp); it is not our code to fix.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>

namespace gf::fakes {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const auto hex = std::string(s.substr(i + 1, 2));
      char* end = nullptr;
      const long v = std::strtol(hex.c_str(), &end, 16);
      if (end == hex.c_str() + 2) {
        out.push_back(static_cast<char>(v));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

std::map<std::string, std::string> parse_query(std::string_view q) {
  std::map<std::string, std::string> out;
  while (!q.empty()) {
    const auto amp = q.find('&');
    const auto part = q.substr(0, amp);
    const auto eq = part.find('=');
    out[percent_decode(part.substr(0, eq))] = eq == std::string_view::npos ? "" : percent_decode(part.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

// YAML (a superset of JSON) → JSON, guessing plain scalars' types as YAML 1.2's core schema does.
json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& item : n) a.push_back(yaml_to_json(item));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: break;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  const auto number = json::parse(s, nullptr, false);
  if (number.is_number()) return number;
  return s;
}

// The value at a dotted field path ("status.phase") as text; "" when absent.
std::string field_text(const json& obj, const std::string& dotted) {
  const json* cur = &obj;
  for (const auto& key : split(dotted, '.')) {
    if (!cur->is_object() || !cur->contains(key)) return "";
    cur = &(*cur)[key];
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_boolean()) return cur->get<bool>() ? "true" : "false";
  return cur->is_null() ? "" : cur->dump();
}

json status_json(int code, std::string_view reason, std::string_view message) {
  return json{{"kind", "Status"},
              {"apiVersion", "v1"},
              {"metadata", json::object()},
              {"status", "Failure"},
              {"message", std::string(message)},
              {"reason", std::string(reason)},
              {"code", code}};
}

// An object path: /api/v1/namespaces/{ns}/{plural}[/{name}] or /apis/{g}/{v}/namespaces/{ns}/{plural}[/{name}].
struct ObjectPath {
  std::string collection;  // the path up to and including {plural}
  std::string name;        // empty for the collection
  std::string plural;
};

std::optional<ObjectPath> object_path(const std::string& path) {
  const auto parts = split(path, '/');  // parts[0] is "" (the leading slash)
  std::size_t ns_at = 0;
  if (parts.size() >= 6 && parts[1] == "api" && parts[2] == "v1")
    ns_at = 3;
  else if (parts.size() >= 7 && parts[1] == "apis")
    ns_at = 4;
  else
    return std::nullopt;
  if (parts[ns_at] != "namespaces" || parts[ns_at + 1].empty() || parts[ns_at + 2].empty()) return std::nullopt;
  if (parts.size() > ns_at + 4) return std::nullopt;
  ObjectPath p;
  p.plural = parts[ns_at + 2];
  for (std::size_t i = 1; i <= ns_at + 2; ++i) p.collection += "/" + parts[i];
  if (parts.size() == ns_at + 4) {
    if (parts[ns_at + 3].empty()) return std::nullopt;
    p.name = parts[ns_at + 3];
  }
  return p;
}

}  // namespace

struct KubeStandin::Impl {
  struct Session;
  struct ExecSession;

  KubeStandinConfig config;
  json nodes = json::array(), pods = json::array();
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::thread thread;
  std::vector<std::shared_ptr<Session>> held;  // sessions that never get an answer (never_answer)

  mutable std::mutex mu;
  std::vector<KubeStandinRequest> requests;
  std::map<std::string, json> objects;  // by item path
  std::string canned;
  long resource_version = 1000;
  // The items a list selects, by kind and fieldSelector, kept while the fixture stands as it is (the
  // pages of one listing then cost their own items, not a pass over 100 000 pods each).
  std::map<std::string, std::vector<const json*>> selections;
  std::vector<KubeStandinExecCall> exec_calls;
  // Open exec streams, shared with each stream: a stream may end after Impl's members are gone (when
  // the io_context is destroyed).
  struct ExecCount {
    std::atomic<std::size_t> open{0}, max{0};
  };
  std::shared_ptr<ExecCount> exec_count = std::make_shared<ExecCount>();

  void accept();
  // The upgrade of a pods/exec request; false when `req` is not one (the normal routes answer it).
  bool exec_upgrade(tcp::socket& socket, const Request& req, std::shared_ptr<void>& keep);

  Response reply(const Request& req, int status, const json& body) const {
    Response res{static_cast<http::status>(status), req.version()};
    res.set(http::field::server, "gpufleet-kube-standin");
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    res.body() = body.dump();
    res.prepare_payload();
    return res;
  }
  Response error(const Request& req, int status, std::string_view reason, std::string_view message) const {
    return reply(req, status, status_json(status, reason, message));
  }

  std::optional<Response> list(const Request& req, const std::map<std::string, std::string>& query,
                               std::string_view kind, const json& all);
  Response objects_route(const Request& req, const ObjectPath& p, const std::map<std::string, std::string>& query);
  Response route(const Request& req);
};

struct KubeStandin::Impl::Session : std::enable_shared_from_this<Session> {
  Session(Impl& impl, tcp::socket socket) : impl(impl), socket(std::move(socket)) {}

  void read() {
    req = {};
    http::async_read(socket, buffer, req, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      if (self->impl.exec_upgrade(self->socket, self->req, self->exec)) return;
      if (self->impl.config.never_answer) {
        self->impl.route(self->req);  // recorded; the answer is dropped and the connection kept open
        self->impl.held.push_back(self);
        return;
      }
      self->write(self->impl.route(self->req));
    });
  }

  void write(Response r) {
    res = std::move(r);  // kept in the session: it must outlive async_write
    http::async_write(socket, res, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      if (self->res.need_eof()) {
        beast::error_code ignored;
        self->socket.shutdown(tcp::socket::shutdown_send, ignored);
        return;
      }
      self->read();
    });
  }

  Impl& impl;
  tcp::socket socket;
  beast::flat_buffer buffer;
  Request req;
  Response res;
  std::shared_ptr<void> exec;
};

// One exec stream: the messages to send, one after another, then the close.
struct KubeStandin::Impl::ExecSession : std::enable_shared_from_this<ExecSession> {
  ExecSession(std::shared_ptr<ExecCount> count, tcp::socket socket) : count(std::move(count)), ws(std::move(socket)) {
    const auto now = ++this->count->open;
    for (auto m = this->count->max.load(); now > m && !this->count->max.compare_exchange_weak(m, now);) {
    }
  }
  ~ExecSession() { --count->open; }

  void next() {
    if (sent == messages.size()) {
      ws.async_close(websocket::close_code::normal, [self = shared_from_this()](beast::error_code) {});
      return;
    }
    ws.binary(true);
    ws.async_write(asio::buffer(messages[sent]), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      ++self->sent;
      self->next();
    });
  }
  void drain() {  // reads until the client goes (a hung pod never answers it)
    ws.async_read(in, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      self->in.consume(self->in.size());
      self->drain();
    });
  }

  std::shared_ptr<ExecCount> count;
  websocket::stream<tcp::socket> ws;
  beast::flat_buffer in;
  std::vector<std::string> messages;
  std::size_t sent = 0;
  asio::steady_timer delay{ws.get_executor()};
};

namespace {

// What a pod's exec answers, framed as the API server frames it: each stream's channel byte alone first,
// stdout in 64-byte pieces, stderr, (v5) the close of stdin and stdout, then the status on channel 3.
// pod: the configured answer; none: the command is not found in the container.
std::vector<std::string> exec_messages(const KubeStandinExecCall& call, const KubeStandinExec* pod) {
  std::vector<std::string> messages;
  const bool v5 = call.protocol == "v5.channel.k8s.io";
  auto channel = [](unsigned char c, std::string_view data) {
    return std::string(1, static_cast<char>(c)) + std::string(data);
  };
  // The real server first sends each stream's channel byte alone.
  for (unsigned char c : {1, 2, 3}) messages.push_back(channel(c, ""));
  json status{{"metadata", json::object()}, {"status", "Success"}};
  if (pod == nullptr || !pod->failure_message.empty()) {
    const std::string message = pod == nullptr
                                    ? fmt::format(
                                          "Internal error occurred: error executing command in container: failed "
                                          "to exec in container: OCI runtime exec failed: exec failed: unable to "
                                          "start container process: exec: \"{}\": executable file not found in "
                                          "$PATH: unknown",
                                          call.command.empty() ? "" : call.command[0])
                                    : pod->failure_message;
    status = json{{"metadata", json::object()},
                  {"status", "Failure"},
                  {"message", message},
                  {"reason", "InternalError"},
                  {"code", 500}};
  } else {
    const auto& e = *pod;
    std::string out = e.out, err = e.err;
    int code = e.exit_code;
    bool rejected = false;
    for (const auto& arg : call.command)
      rejected = rejected || (!e.reject_field.empty() && arg.find(e.reject_field) != std::string::npos);
    if (rejected) {
      out = fmt::format("Field \"{}\" is not a valid field to query.\n\n", e.reject_field);
      err.clear();
      code = 2;
    }
    for (std::size_t i = 0; i < out.size(); i += 64) messages.push_back(channel(1, out.substr(i, 64)));
    if (!err.empty()) messages.push_back(channel(2, err));
    if (code != 0)
      status = json{
          {"metadata", json::object()},
          {"status", "Failure"},
          {"message", fmt::format("command terminated with non-zero exit code: exit status {}", code)},
          {"reason", "NonZeroExitCode"},
          {"details", {{"causes", json::array({json{{"reason", "ExitCode"}, {"message", std::to_string(code)}}})}}}};
  }
  if (v5) {
    messages.push_back(channel(255, std::string(1, '\x01')));
    messages.push_back(channel(255, std::string(1, '\x02')));
  }
  messages.push_back(channel(3, status.dump()));
  return messages;
}

}  // namespace

bool KubeStandin::Impl::exec_upgrade(tcp::socket& socket, const Request& req, std::shared_ptr<void>& keep) {
  const std::string target(req.target());
  const auto qpos = target.find('?');
  const auto parts = split(target.substr(0, qpos), '/');
  // "", api, v1, namespaces, {ns}, pods, {pod}, exec
  if (parts.size() != 8 || parts[1] != "api" || parts[3] != "namespaces" || parts[5] != "pods" || parts[7] != "exec")
    return false;
  if (!websocket::is_upgrade(req)) return false;
  KubeStandinExecCall call;
  call.pod = parts[4] + "/" + parts[6];
  call.offered = std::string(req[http::field::sec_websocket_protocol]);
  const std::string_view q = qpos == std::string::npos ? std::string_view() : std::string_view(target).substr(qpos + 1);
  for (const auto& kv : split(q, '&')) {
    const auto eq = kv.find('=');
    const auto key = percent_decode(kv.substr(0, eq));
    const auto value = eq == std::string::npos ? std::string() : percent_decode(kv.substr(eq + 1));
    if (key == "command") call.command.push_back(value);
    if (key == "container") call.container = value;
  }
  auto refuse = [&](int status, std::string_view reason, std::string_view message) {
    auto res = std::make_shared<Response>(error(req, status, reason, message));
    res->keep_alive(false);
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    http::async_write(*sock, *res, [res, sock](beast::error_code, std::size_t) {
      beast::error_code ignored;
      sock->shutdown(tcp::socket::shutdown_send, ignored);
    });
  };
  std::lock_guard lock(mu);
  requests.push_back({std::string(req.method_string()),
                      target,
                      target.substr(0, qpos),
                      {},
                      std::string(req[http::field::authorization]),
                      {},
                      {}});
  for (const auto& p : config.exec_protocols) {
    for (const auto& o : split(call.offered, ',')) {
      auto offered = o;
      offered.erase(0, offered.find_first_not_of(' '));
      offered.erase(offered.find_last_not_of(' ') + 1);
      if (call.protocol.empty() && offered == p) call.protocol = p;
    }
  }
  if (!config.token.empty() && req[http::field::authorization] != "Bearer " + config.token) {
    call.protocol.clear();
    exec_calls.push_back(call);
    refuse(401, "Unauthorized", "Unauthorized");
    return true;
  }
  if (config.forbid_exec) {
    call.protocol.clear();
    exec_calls.push_back(call);
    refuse(403, "Forbidden",
           fmt::format("pods \"{}\" is forbidden: User \"system:serviceaccount:gpufleet:gpufleet\" cannot create "
                       "resource \"pods/exec\" in API group \"\" in the namespace \"{}\"",
                       parts[6], parts[4]));
    return true;
  }
  if (call.protocol.empty()) {
    exec_calls.push_back(call);
    refuse(400, "BadRequest", "no supported exec subprotocol was offered");
    return true;
  }
  exec_calls.push_back(call);
  auto session = std::make_shared<ExecSession>(exec_count, std::move(socket));
  auto it = config.exec.find(call.pod);
  if (it == config.exec.end() && config.exec_default) it = config.exec.emplace(call.pod, *config.exec_default).first;
  const KubeStandinExec* pod = it == config.exec.end() ? nullptr : &it->second;
  const bool hang = pod != nullptr && pod->hang;
  const unsigned delay_ms = pod != nullptr ? pod->delay_ms : 0;
  session->messages = exec_messages(call, pod);
  session->ws.set_option(websocket::stream_base::decorator([protocol = call.protocol](websocket::response_type& res) {
    res.set(http::field::sec_websocket_protocol, protocol);
  }));
  session->ws.async_accept(req, [session, hang, delay_ms](beast::error_code ec) {
    if (ec) return;
    session->drain();
    if (hang) return;
    if (delay_ms == 0) return session->next();
    session->delay.expires_after(std::chrono::milliseconds(delay_ms));
    session->delay.async_wait([session](beast::error_code ec) {
      if (!ec) session->next();
    });
  });
  keep = session;  // a hung pod's stream lives as long as its connection's session
  return true;
}

void KubeStandin::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed: the stand-in is stopping
    std::make_shared<Session>(*this, std::move(socket))->read();
    accept();
  });
}

// One page of `all` after the fieldSelector, as the API server pages a list: the continue token names
// the offset of the next item; remainingItemCount counts what is left after this page.
std::optional<Response> KubeStandin::Impl::list(const Request& req, const std::map<std::string, std::string>& query,
                                                std::string_view kind, const json& all) {
  std::vector<const json*> items;  // the selected items, not copies: a page of 500 of 100 000 pods copies 500
  const auto fs = query.find("fieldSelector");
  std::vector<std::tuple<std::string, std::string, bool>> terms;  // field, value, equal
  if (fs != query.end() && !fs->second.empty()) {
    for (const auto& term : split(fs->second, ',')) {
      const auto ne = term.find("!=");
      const auto eq = term.find('=');
      if (eq == std::string::npos) return error(req, 400, "BadRequest", "invalid field selector: " + term);
      std::string field = term.substr(0, ne != std::string::npos ? ne : eq);
      std::string value = term.substr(ne != std::string::npos          ? ne + 2
                                      : term.compare(eq, 2, "==") == 0 ? eq + 2
                                                                       : eq + 1);
      static const std::vector<std::string> kFields = {"status.phase", "spec.nodeName", "metadata.name",
                                                       "metadata.namespace", "spec.unschedulable"};
      if (std::find(kFields.begin(), kFields.end(), field) == kFields.end()) {
        return error(req, 400, "BadRequest", fmt::format("field label not supported: {}", field));
      }
      terms.emplace_back(std::move(field), std::move(value), ne == std::string::npos);
    }
  }
  const std::string key = fmt::format("{}\n{}\n{}", kind, fs != query.end() ? fs->second : "", all.size());
  if (const auto hit = selections.find(key); hit != selections.end()) {
    items = hit->second;
  } else {
    for (const auto& item : all) {
      bool keep = true;
      if (config.honour_field_selector) {
        for (const auto& [field, value, equal] : terms) keep = keep && ((field_text(item, field) == value) == equal);
      }
      if (keep) items.push_back(&item);
    }
    if (selections.size() > 64) selections.clear();
    selections.emplace(key, items);
  }
  std::size_t offset = 0;
  if (const auto c = query.find("continue"); c != query.end() && !c->second.empty()) {
    const std::string prefix = fmt::format("{}:", kind);
    char* end = nullptr;
    const auto digits = c->second.substr(std::min(prefix.size(), c->second.size()));
    offset = std::strtoul(digits.c_str(), &end, 10);
    if (!c->second.starts_with(prefix) || digits.empty() || *end != '\0' || offset > items.size()) {
      return error(req, 400, "BadRequest", "continue key is not valid: " + c->second);
    }
  }
  std::size_t limit = items.size();
  if (const auto l = query.find("limit"); l != query.end() && !l->second.empty()) {
    limit = std::strtoul(l->second.c_str(), nullptr, 10);
    if (limit == 0) limit = items.size();
  }
  const std::size_t end = std::min(items.size(), offset + limit);
  json page = json::array();
  for (std::size_t i = offset; i < end; ++i) page.push_back(*items[i]);
  json meta{{"resourceVersion", std::to_string(resource_version)}};
  if (end < items.size()) {
    meta["continue"] = fmt::format("{}:{}", kind, end);
    meta["remainingItemCount"] = items.size() - end;
  }
  return reply(req, 200, json{{"kind", kind}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", page}});
}

Response KubeStandin::Impl::objects_route(const Request& req, const ObjectPath& p,
                                          const std::map<std::string, std::string>& query) {
  const std::string method(req.method_string());
  const std::string content_type(req[http::field::content_type]);
  auto parse_body = [&](bool yaml) -> std::optional<json> {
    if (!yaml) {
      auto j = json::parse(req.body(), nullptr, false);
      if (j.is_discarded()) return std::nullopt;
      return j;
    }
    try {
      return yaml_to_json(YAML::Load(req.body()));
    } catch (const YAML::Exception&) {
      return std::nullopt;
    }
  };
  auto stamp = [&](json& obj, const json* previous) {
    obj["metadata"]["resourceVersion"] = std::to_string(++resource_version);
    obj["metadata"]["uid"] =
        previous != nullptr ? (*previous)["metadata"]["uid"] : json(fmt::format("uid-{}", resource_version));
  };

  if (p.name.empty()) {
    if (method != "POST") return error(req, 405, "MethodNotAllowed", "the server does not allow this method");
    auto body = parse_body(content_type.find("yaml") != std::string::npos);
    if (!body || !body->is_object()) return error(req, 400, "BadRequest", "the body is not an object");
    const std::string name = field_text(*body, "metadata.name");
    if (name.empty()) return error(req, 422, "Invalid", "metadata.name: Required value");
    const std::string item = p.collection + "/" + name;
    if (objects.count(item) != 0) {
      return error(req, 409, "AlreadyExists", fmt::format("{} \"{}\" already exists", p.plural, name));
    }
    stamp(*body, nullptr);
    objects[item] = *body;
    return reply(req, 201, *body);
  }

  const std::string item = p.collection + "/" + p.name;
  const auto it = objects.find(item);
  if (method == "GET") {
    if (it == objects.end()) return error(req, 404, "NotFound", fmt::format("{} \"{}\" not found", p.plural, p.name));
    return reply(req, 200, it->second);
  }
  if (method == "DELETE") {
    if (it == objects.end()) return error(req, 404, "NotFound", fmt::format("{} \"{}\" not found", p.plural, p.name));
    json gone = it->second;
    objects.erase(it);
    return reply(req, 200, gone);
  }
  if (method != "PATCH") return error(req, 405, "MethodNotAllowed", "the server does not allow this method");
  if (content_type != "application/apply-patch+yaml") {
    return error(req, 415, "UnsupportedMediaType",
                 fmt::format("the body of the request was in an unknown format - "
                             "accepted media types include: "
                             "application/apply-patch+yaml (got {})",
                             content_type));
  }
  const auto fm = query.find("fieldManager");
  if (fm == query.end() || fm->second.empty()) {
    return error(req, 400, "BadRequest", "PATCH requests with apply must set fieldManager");
  }
  auto body = parse_body(true);
  if (!body || !body->is_object()) return error(req, 400, "BadRequest", "error decoding YAML: not an object");
  if (field_text(*body, "apiVersion").empty() || field_text(*body, "kind").empty()) {
    return error(req, 400, "BadRequest", "apiVersion and kind must be set");
  }
  if (field_text(*body, "metadata.name") != p.name) {
    return error(req, 400, "BadRequest", "the name of the object does not match the name on the URL");
  }
  const bool existed = it != objects.end();
  (*body)["metadata"]["managedFields"] = json::array({json{{"manager", fm->second}, {"operation", "Apply"}}});
  stamp(*body, existed ? &it->second : nullptr);
  objects[item] = *body;
  return reply(req, existed ? 200 : 201, *body);
}

Response KubeStandin::Impl::route(const Request& req) {
  const std::string target(req.target());
  const auto qpos = target.find('?');
  const std::string path = target.substr(0, qpos);
  const auto query =
      parse_query(qpos == std::string::npos ? std::string_view() : std::string_view(target).substr(qpos + 1));
  const std::string method(req.method_string());

  std::lock_guard lock(mu);
  requests.push_back({method, target, path, query, std::string(req[http::field::authorization]),
                      std::string(req[http::field::content_type]), req.body()});
  if (!canned.empty()) {
    Response res = reply(req, 200, json::object());
    res.body() = canned;  // as given, malformed or huge
    res.prepare_payload();
    return res;
  }
  if (!config.token.empty() && req[http::field::authorization] != "Bearer " + config.token) {
    return error(req, 401, "Unauthorized", "Unauthorized");
  }
  if (path == "/api/v1/nodes" && method == "GET") return *list(req, query, "NodeList", nodes);
  if (path == "/api/v1/pods" && method == "GET") {
    if (config.forbid_pods) {
      return error(req, 403, "Forbidden",
                   "pods is forbidden: User \"system:serviceaccount:gpufleet:gpufleet\" cannot list resource "
                   "\"pods\" in API group \"\" at the cluster scope");
    }
    return *list(req, query, "PodList", pods);
  }
  if (const auto p = object_path(path)) return objects_route(req, *p, query);
  return error(req, 404, "NotFound", "the server could not find the requested resource");
}

KubeStandin::KubeStandin(KubeStandinConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  const auto fixture = json::parse(impl_->config.fixture_json, nullptr, false);
  if (!fixture.is_object()) throw std::runtime_error("kube stand-in: the fixture is not a JSON object");
  if (fixture.contains("nodes")) impl_->nodes = fixture["nodes"];
  if (fixture.contains("pods")) impl_->pods = fixture["pods"];
  const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

KubeStandin::~KubeStandin() {
  // Stop the loop, then join; sessions still pending are destroyed with the io_context after the
  // thread that used them has gone.
  impl_->ioc.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->held.clear();
  beast::error_code ignored;
  impl_->acceptor.close(ignored);
}

unsigned short KubeStandin::port() const { return impl_->acceptor.local_endpoint().port(); }

std::string KubeStandin::url() const { return fmt::format("http://127.0.0.1:{}", port()); }

std::vector<KubeStandinRequest> KubeStandin::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requests;
}

std::size_t KubeStandin::count(std::string_view method, std::string_view path) const {
  std::lock_guard lock(impl_->mu);
  std::size_t n = 0;
  for (const auto& r : impl_->requests) {
    if (r.method == method && r.path == path) ++n;
  }
  return n;
}

std::optional<std::string> KubeStandin::object(std::string_view item_path) const {
  std::lock_guard lock(impl_->mu);
  const auto it = impl_->objects.find(std::string(item_path));
  if (it == impl_->objects.end()) return std::nullopt;
  return it->second.dump();
}

std::vector<KubeStandinExecCall> KubeStandin::exec_calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->exec_calls;
}

std::size_t KubeStandin::max_concurrent_execs() const { return impl_->exec_count->max.load(); }

void KubeStandin::set_canned_answer(std::string body) {
  std::lock_guard lock(impl_->mu);
  impl_->canned = std::move(body);
}

}  // namespace gf::fakes
