#include "cluster/kube_client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/text.hpp"
#include "platform/http_client.hpp"
#include "platform/log.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 53;
// A listing that has not ended after this many pages is a server bug (or a hostile one): stop.
constexpr unsigned kMaxPages = 100000;
constexpr std::string_view kLiveFieldSelector = "status.phase!=Succeeded,status.phase!=Failed";
constexpr std::array<std::string_view, 2> kGpuResources = {kNvidiaGpu, kAmdGpu};
constexpr std::array<std::string_view, 3> kProductLabels = {"nvidia.com/gpu.product", "amd.com/gpu.product-name",
                                                            "beta.amd.com/gpu.product-name"};

const json* member(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string string_at(const json& obj, std::string_view key) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

const json* path(const json& obj, std::initializer_list<std::string_view> keys) {
  const json* cur = &obj;
  for (const auto k : keys) {
    cur = member(*cur, k);
    if (cur == nullptr) return nullptr;
  }
  return cur;
}

// The items array of a list of `kind`; an error for anything else.
Result<const json*> list_items(const json& doc, std::string_view kind) {
  if (!doc.is_object()) return make_error(fmt::format("not a {} (not a JSON object)", kind));
  const auto got = string_at(doc, "kind");
  if (!got.empty() && got != kind)
    return make_error(fmt::format("expected a {}, got kind {}", kind, platform::printable(got, 60)));
  static const json kEmpty = json::array();
  const json* items = member(doc, "items");
  if (items == nullptr) return &kEmpty;
  if (!items->is_array()) return make_error("items is not a list");
  return items;
}

std::string continue_of(const json& doc) {
  const json* c = path(doc, {"metadata", "continue"});
  return c != nullptr && c->is_string() ? c->get<std::string>() : std::string();
}

// A quantity from a resource map, 0 when absent.
Result<std::uint64_t> quantity_in(const json* map, std::string_view resource) {
  if (map == nullptr) return std::uint64_t{0};
  const json* v = member(*map, resource);
  if (v == nullptr) return std::uint64_t{0};
  if (v->is_number_unsigned()) return std::min(v->get<std::uint64_t>(), kMaxCount);
  if (!v->is_string()) return make_error(fmt::format("{} is not a quantity", resource));
  auto q = parse_quantity_count(v->get_ref<const std::string&>());
  if (!q) return make_error(fmt::format("{}: {}", resource, q.error().message));
  return q;
}

// Per container: requests, else limits (an extended resource given only as a limit requests that much).
Result<std::uint64_t> container_request(const json& container, std::string_view resource) {
  const json* res = member(container, "resources");
  if (res == nullptr) return std::uint64_t{0};
  const json* requests = member(*res, "requests");
  if (requests != nullptr && member(*requests, resource) != nullptr) return quantity_in(requests, resource);
  return quantity_in(member(*res, "limits"), resource);
}

Result<std::uint64_t> pod_request(const json& spec, std::string_view resource) {
  std::uint64_t regular = 0, sidecars = 0, init_peak = 0;
  if (const json* cs = member(spec, "containers"); cs != nullptr && cs->is_array()) {
    for (const auto& c : *cs) {
      auto r = container_request(c, resource);
      if (!r) return r;
      regular = std::min(kMaxCount, regular + *r);
    }
  }
  if (const json* ics = member(spec, "initContainers"); ics != nullptr && ics->is_array()) {
    for (const auto& c : *ics) {
      auto r = container_request(c, resource);
      if (!r) return r;
      if (string_at(c, "restartPolicy") == "Always") {
        // A sidecar keeps running beside the containers and the init containers after it.
        sidecars = std::min(kMaxCount, sidecars + *r);
        init_peak = std::max(init_peak, sidecars);
      } else {
        init_peak = std::max(init_peak, std::min(kMaxCount, *r + sidecars));
      }
    }
  }
  return std::max(std::min(kMaxCount, regular + sidecars), init_peak);
}

std::string reason_phrase(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "";
  }
}

// The message of a Kubernetes Status body, else the start of the body itself.
std::string status_message(std::string_view body) {
  const auto doc = json::parse(body, nullptr, false);
  if (doc.is_object()) {
    if (auto m = string_at(doc, "message"); !m.empty()) return platform::printable(m, 300);
  }
  const auto line = body.substr(0, body.find('\n'));
  return platform::printable(line, 200);
}

std::string credential_kind(const KubeConfig& c) {
  if (!c.bearer_token.empty()) return "a bearer token";
  if (!c.tls.client_cert_pem.empty() || !c.tls.client_cert_file.empty()) return "a client certificate";
  return "no credentials";
}

}  // namespace

Result<std::uint64_t> parse_quantity_count(std::string_view q) {
  const std::string shown = platform::printable(q, 40);
  auto bad = [&] { return make_error(fmt::format("\"{}\" is not a quantity", shown)); };
  if (!q.empty() && q.front() == '+') q.remove_prefix(1);
  if (!q.empty() && q.front() == '-') return make_error(fmt::format("\"{}\" is negative", shown));
  unsigned __int128 num = 0;
  int digits = 0, frac_digits = 0;
  bool dot = false;
  std::size_t i = 0;
  for (; i < q.size(); ++i) {
    const char c = q[i];
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (num == 0 && c == '0') {
      if (dot) ++frac_digits;  // leading zeros carry no value but still scale the fraction
      continue;
    }
    if (++digits > 30) return make_error(fmt::format("\"{}\" is too large", shown));
    num = num * 10 + static_cast<unsigned>(c - '0');
    if (dot) ++frac_digits;
  }
  // At least one digit, on either side of the point.
  const std::string_view number = q.substr(0, i);
  if (number.empty() || number == ".") return bad();
  const std::string_view suffix = q.substr(i);
  int exp10 = -frac_digits, shift = 0;
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary = {
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}}};
  static constexpr std::array<std::pair<std::string_view, int>, 9> kDecimal = {
      {{"n", -9}, {"u", -6}, {"m", -3}, {"", 0}, {"k", 3}, {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}}};
  bool known = false;
  for (const auto& [s, b] : kBinary) {
    if (suffix == s) shift = b, known = true;
  }
  for (const auto& [s, e] : kDecimal) {
    if (suffix == s) exp10 += e, known = true;
  }
  if (suffix == "E") exp10 += 18, known = true;
  if (!known && suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    std::string_view e = suffix.substr(1);
    bool neg = false;
    if (e.front() == '+' || e.front() == '-') neg = e.front() == '-', e.remove_prefix(1);
    if (e.size() > 3) return bad();
    const auto v = core::parse_uint(e);
    if (!v) return bad();
    exp10 += neg ? -static_cast<int>(*v) : static_cast<int>(*v);
    known = true;
  }
  if (!known) return bad();
  if (num == 0) return std::uint64_t{0};
  const unsigned __int128 limit = kMaxCount;
  auto too_large = [&] { return make_error(fmt::format("\"{}\" is too large", shown)); };
  if (shift > 0) {
    if (num > (limit >> shift)) return too_large();
    num <<= shift;
  }
  for (; exp10 > 0; --exp10) {
    if (num > limit / 10) return too_large();
    num *= 10;
  }
  if (exp10 < 0) {
    // Rounds up: 1500m is 2 GPUs, as Kubernetes rounds a quantity's Value().
    unsigned __int128 den = 1;
    for (; exp10 < 0 && den <= num; ++exp10) den *= 10;
    num = exp10 < 0 ? 1 : (num + den - 1) / den;
  }
  if (num > limit) return too_large();
  return static_cast<std::uint64_t>(num);
}

bool pod_holds_gpus(std::string_view phase) { return phase != "Succeeded" && phase != "Failed"; }

Result<NodePage> parse_node_list(std::string_view text) {
  const auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error("not JSON");
  auto items = list_items(doc, "NodeList");
  if (!items) return items.error();
  NodePage page;
  page.continue_token = continue_of(doc);
  for (const auto& item : **items) {
    core::KubeNode node;
    node.name =
        platform::printable(string_at(member(item, "metadata") ? *member(item, "metadata") : json(), "name"), 253);
    if (node.name.empty()) return make_error("a node without metadata.name");
    if (const json* labels = path(item, {"metadata", "labels"}); labels != nullptr && labels->is_object()) {
      for (const auto& [k, v] : labels->items()) {
        if (v.is_string()) node.labels.emplace(k, v.get<std::string>());
      }
    }
    const json* capacity = path(item, {"status", "capacity"});
    const json* allocatable = path(item, {"status", "allocatable"});
    for (const auto resource : kGpuResources) {
      auto cap = quantity_in(capacity, resource);
      auto alloc = quantity_in(allocatable != nullptr ? allocatable : capacity, resource);
      if (!cap) return make_error(fmt::format("node {}: capacity {}", node.name, cap.error().message));
      if (!alloc) return make_error(fmt::format("node {}: allocatable {}", node.name, alloc.error().message));
      if (*cap > node.gpu_capacity || (node.gpu_resource.empty() && *alloc > 0)) {
        node.gpu_resource = std::string(resource);
        node.gpu_capacity = *cap;
        node.gpu_allocatable = *alloc;
      }
    }
    for (const auto label : kProductLabels) {
      const auto it = node.labels.find(std::string(label));
      if (it != node.labels.end() && !it->second.empty()) {
        node.gpu_product = platform::printable(it->second, 120);
        break;
      }
    }
    if (const json* conds = path(item, {"status", "conditions"}); conds != nullptr && conds->is_array()) {
      for (const auto& c : *conds) {
        if (string_at(c, "type") == "Ready") node.ready = string_at(c, "status") == "True";
      }
    }
    if (const json* u = path(item, {"spec", "unschedulable"}); u != nullptr && u->is_boolean()) {
      node.unschedulable = u->get<bool>();
    }
    page.nodes.push_back(std::move(node));
  }
  return page;
}

Result<PodPage> parse_pod_list(std::string_view text) {
  const auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error("not JSON");
  auto items = list_items(doc, "PodList");
  if (!items) return items.error();
  PodPage page;
  page.continue_token = continue_of(doc);
  for (const auto& item : **items) {
    const json* spec = member(item, "spec");
    if (spec == nullptr) continue;
    PodGpuRequest pod;
    if (const json* meta = member(item, "metadata")) {
      pod.namespace_ = string_at(*meta, "namespace");
      pod.name = string_at(*meta, "name");
    }
    pod.node = string_at(*spec, "nodeName");
    if (const json* status = member(item, "status")) pod.phase = string_at(*status, "phase");
    if (const json* cs = member(*spec, "containers"); cs != nullptr && cs->is_array()) {
      for (const auto& c : *cs) {
        bool asks = false;
        for (const auto resource : kGpuResources) {
          auto r = container_request(c, resource);
          asks = asks || (r && *r > 0);
        }
        if (asks) {
          pod.gpu_container = string_at(c, "name");
          break;
        }
      }
    }
    if (const json* st = path(item, {"status", "containerStatuses"});
        st != nullptr && st->is_array() && !pod.gpu_container.empty()) {
      for (const auto& cs : *st)
        if (string_at(cs, "name") == pod.gpu_container)
          pod.gpu_container_running = path(cs, {"state", "running"}) != nullptr;
    }
    for (const auto resource : kGpuResources) {
      auto n = pod_request(*spec, resource);
      if (!n)
        return make_error(fmt::format("pod {}/{}: {}", platform::printable(pod.namespace_, 63),
                                      platform::printable(pod.name, 253), n.error().message));
      if (*n > 0) pod.gpus.emplace(std::string(resource), *n);
    }
    if (!pod.gpus.empty()) page.pods.push_back(std::move(pod));
  }
  return page;
}

void add_pod_requests(std::vector<core::KubeNode>& nodes, const std::vector<PodGpuRequest>& pods) {
  std::map<std::string_view, core::KubeNode*> by_name;
  for (auto& n : nodes) by_name.emplace(n.name, &n);
  for (const auto& pod : pods) {
    if (pod.node.empty() || !pod_holds_gpus(pod.phase)) continue;
    const auto it = by_name.find(pod.node);
    if (it == by_name.end() || it->second->gpu_resource.empty()) continue;
    core::KubeNode& node = *it->second;
    const auto req = pod.gpus.find(node.gpu_resource);
    if (req != pod.gpus.end()) node.gpu_requested = std::min(kMaxCount, node.gpu_requested + req->second);
  }
}

std::string describe_status_error(const KubeConfig& config, long status, std::string_view method,
                                  std::string_view path_and_query, std::string_view body, std::string_view rbac) {
  const std::string server = platform::printable(platform::url_for_display(config.server), 300);
  if (status == 401) {
    return fmt::format("the API server at {} refused the credentials (401 Unauthorized) from {} ({})", server,
                       platform::printable(config.source, 300), credential_kind(config));
  }
  const std::string message = status_message(body);
  if (status == 403) {
    return fmt::format("the API server at {} forbids {} {} (403 Forbidden): {}{}{}", server, method,
                       platform::printable(path_and_query, 300), message.empty() ? "no reason given" : message,
                       rbac.empty() ? "" : "; the account needs RBAC permission to ", rbac);
  }
  const auto phrase = reason_phrase(status);
  return fmt::format("the API server at {} answered {}{}{} to {} {}{}{}", server, status, phrase.empty() ? "" : " ",
                     phrase, method, platform::printable(path_and_query, 300), message.empty() ? "" : ": ", message);
}

KubeClient::KubeClient(KubeConfig config, KubeOptions options) : config_(std::move(config)), options_(options) {
  if (options_.page_size == 0) options_.page_size = 500;
}

Result<KubeClient::Response> KubeClient::request(std::string_view method, std::string_view path_and_query,
                                                 std::optional<std::string> body, std::string_view content_type) {
  if (path_and_query.empty() || path_and_query.front() != '/') {
    return make_error(
        fmt::format("Kubernetes API path \"{}\" must start with /", platform::printable(path_and_query, 300)));
  }
  platform::HttpRequest rq;
  rq.method = std::string(method);
  rq.url = config_.server + std::string(path_and_query);
  rq.headers.emplace_back("Accept", "application/json");
  rq.body = std::move(body);
  rq.content_type = std::string(content_type);
  rq.bearer_token = config_.bearer_token;
  rq.tls = config_.tls;
  rq.connect_timeout = std::min(options_.timeout, std::chrono::milliseconds(5000));
  rq.timeout = options_.timeout;
  rq.max_body_bytes = options_.max_page_bytes;
  auto outcome = platform::http_perform(rq);
  if (outcome.ok()) {
    auto& r = outcome.response();
    return Response{r.status, std::move(r.body), std::move(r.content_type)};
  }
  const auto& e = outcome.error();
  const std::string server = platform::printable(platform::url_for_display(config_.server), 300);
  const std::string what = fmt::format("{} {}", method, platform::printable(path_and_query, 300));
  switch (e.kind) {
    case platform::TransportFailure::Unreachable:
      return make_error(fmt::format("cannot reach the API server at {} (from {}): {}", server,
                                    platform::printable(config_.source, 300), platform::printable(e.message, 300)));
    case platform::TransportFailure::TimedOut:
      return make_error(
          fmt::format("the API server at {} did not answer {} within {} ms", server, what, options_.timeout.count()));
    case platform::TransportFailure::Tls: {
      const bool system_cas = config_.tls.ca_file.empty() && config_.tls.ca_pem.empty();
      return make_error(fmt::format("TLS with the API server at {} failed (from {}): {}{}", server,
                                    platform::printable(config_.source, 300), platform::printable(e.message, 300),
                                    system_cas && !config_.tls.insecure_skip_verify
                                        ? " (no certificate-authority was given: the system's CAs were used)"
                                        : ""));
    }
    case platform::TransportFailure::TooLarge:
      return make_error(
          fmt::format("the API server at {} sent more than {} bytes for {}", server, options_.max_page_bytes, what));
    case platform::TransportFailure::Cancelled:
    case platform::TransportFailure::Other: break;
  }
  return make_error(
      fmt::format("{} to the API server at {} failed: {}", what, server, platform::printable(e.message, 300)));
}

Result<std::string> KubeClient::get_list(const std::string& path_and_query, std::string_view what,
                                         std::string_view rbac) {
  auto r = request("GET", path_and_query);
  if (!r) return r.error();
  if (r->status != 200) {
    return make_error(describe_status_error(config_, r->status, "GET", path_and_query, r->body, rbac) +
                      fmt::format(" ({})", what));
  }
  return std::move(r->body);
}

Result<std::vector<core::KubeNode>> KubeClient::gpu_nodes() {
  const std::string server = platform::printable(platform::url_for_display(config_.server), 300);
  // Pages of one listing: `first` is the path with its query; the continue token is appended.
  auto pages = [&](const std::string& first, std::string_view what, std::string_view rbac, std::string_view kind,
                   auto&& parse, auto&& take) -> Result<void> {
    std::string token;
    for (unsigned n = 0; n < kMaxPages; ++n) {
      const std::string target = token.empty() ? first : first + "&continue=" + platform::url_escape(token);
      auto body = get_list(target, what, rbac);
      if (!body) return body.error();
      auto page = parse(*body);
      if (!page) {
        return make_error(fmt::format("the API server at {} sent a malformed {} for GET {}: {}", server, kind,
                                      platform::printable(target, 300), page.error().message));
      }
      take(*page);
      if (page->continue_token.empty()) return {};
      if (page->continue_token == token) {
        return make_error(
            fmt::format("the API server at {} repeated the continue token of {} ({})", server, kind, what));
      }
      token = std::move(page->continue_token);
    }
    return make_error(fmt::format("the API server at {} did not end the {} after {} pages", server, kind, kMaxPages));
  };

  std::vector<core::KubeNode> nodes;
  auto listed = pages(
      fmt::format("/api/v1/nodes?limit={}", options_.page_size), "list nodes",
      "list nodes (cluster-wide: get and list on nodes)", "NodeList",
      [](const std::string& b) { return parse_node_list(b); },
      [&](NodePage& p) { std::move(p.nodes.begin(), p.nodes.end(), std::back_inserter(nodes)); });
  if (!listed) return listed.error();

  std::vector<PodGpuRequest> pods;
  listed = pages(
      fmt::format("/api/v1/pods?limit={}&fieldSelector={}", options_.page_size,
                  platform::url_escape(kLiveFieldSelector)),
      "list pods", "list pods in all namespaces (get and list on pods)", "PodList",
      [](const std::string& b) { return parse_pod_list(b); },
      [&](PodPage& p) {
        // The same filter as the fieldSelector, for servers (and proxies) that ignore it.
        for (auto& pod : p.pods) {
          if (pod_holds_gpus(pod.phase)) pods.push_back(std::move(pod));
        }
      });
  if (!listed) return listed.error();
  add_pod_requests(nodes, pods);
  return nodes;
}

Result<std::vector<PodGpuRequest>> KubeClient::running_gpu_pods() {
  const std::string server = platform::printable(platform::url_for_display(config_.server), 300);
  const std::string first = fmt::format("/api/v1/pods?limit={}&fieldSelector={}", options_.page_size,
                                        platform::url_escape("status.phase=Running"));
  std::vector<PodGpuRequest> pods;
  std::string token;
  for (unsigned n = 0; n < kMaxPages; ++n) {
    const std::string target = token.empty() ? first : first + "&continue=" + platform::url_escape(token);
    auto body = get_list(target, "list pods", "list pods in all namespaces (get and list on pods)");
    if (!body) return body.error();
    auto page = parse_pod_list(*body);
    if (!page)
      return make_error(fmt::format("the API server at {} sent a malformed PodList for GET {}: {}", server,
                                    platform::printable(target, 300), page.error().message));
    for (auto& pod : page->pods)
      if (pod.phase == "Running") pods.push_back(std::move(pod));  // again, for servers that ignore the selector
    if (page->continue_token.empty()) return pods;
    if (page->continue_token == token)
      return make_error(fmt::format("the API server at {} repeated the continue token of PodList (list pods)", server));
    token = std::move(page->continue_token);
  }
  return make_error(fmt::format("the API server at {} did not end the PodList after {} pages", server, kMaxPages));
}

}  // namespace gf::cluster
