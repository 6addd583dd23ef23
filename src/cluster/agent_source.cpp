// gpufleet agents → per-node GPU metrics (see agent_source.hpp).
#include "cluster/agent_source.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backends/backend.hpp"
#include "core/text.hpp"
#include "platform/http_client.hpp"
#include "platform/url.hpp"
#include "wire/fleet_json.hpp"

namespace gf::cluster {

Result<std::string> normalize_agent_url(std::string_view url) {
  std::string u(core::trim(url));
  while (!u.empty() && u.back() == '/') u.pop_back();
  const bool http = u.rfind("http://", 0) == 0, https = u.rfind("https://", 0) == 0;
  if (!http && !https)
    return make_error(fmt::format("agent URL '{}' is not http:// or https://", platform::url_for_display(u)));
  if (url_host(u).empty()) return make_error(fmt::format("agent URL '{}' names no host", platform::url_for_display(u)));
  for (char c : u)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
      return make_error("an agent URL contains a space or a control character");
  if (platform::url_for_display(u).ends_with("://(hidden)"))
    return make_error(
        fmt::format("agent URL '{}' has an '@' after its host: percent-encode a '/', '?' or '#' in "
                    "its password (%2F, %3F, %23)",
                    platform::url_for_display(u)));
  return u;
}

std::string url_host(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return {};
  std::string_view rest = url.substr(scheme + 3);
  rest = rest.substr(0, std::min(rest.find('/'), rest.size()));
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    return close == std::string_view::npos ? std::string() : std::string(rest.substr(1, close - 1));
  }
  return std::string(rest.substr(0, std::min(rest.find(':'), rest.size())));
}

Result<std::vector<std::string>> parse_agent_list(std::string_view text, std::string_view source) {
  std::vector<std::string> out;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = core::trim(line);
    if (line.empty()) continue;
    auto u = normalize_agent_url(line);
    if (!u) return make_error(fmt::format("{}:{}: {}", source, line_no, u.error().message));
    if (std::find(out.begin(), out.end(), *u) == out.end()) out.push_back(std::move(*u));
  }
  return out;
}

Result<core::NodeMetrics> parse_agent_document(std::string_view body, std::string_view base_url) {
  auto doc = wire::node_metrics_from_gpu_metrics(body);
  if (!doc) return doc.error();
  core::NodeMetrics m = std::move(doc->metrics);
  m.source = "agent";
  m.agent_url = platform::url_for_display(base_url);  // a password in the URL stays in the request
  m.gpu_resource = std::string(backends::kubernetes_resource(doc->backend));
  if (m.node.empty()) {
    m.node = url_host(base_url);
    for (auto& g : m.gpus) g.node = m.node;
  }
  return m;
}

std::vector<core::NodeMetrics> fetch_agents(const std::vector<std::string>& base_urls,
                                            std::chrono::milliseconds timeout) {
  std::vector<platform::HttpRequest> reqs;
  reqs.reserve(base_urls.size());
  for (const auto& u : base_urls) {
    platform::HttpRequest r;
    r.url = u + "/api/v1/monitoring/gpu-metrics";
    r.timeout = timeout;
    r.connect_timeout = std::min(timeout, std::chrono::milliseconds(5000));
    r.max_body_bytes = 16u << 20;
    r.headers.emplace_back("Accept", "application/json");
    reqs.push_back(std::move(r));
  }
  auto outcomes = platform::http_perform_all(reqs, 64);
  std::vector<core::NodeMetrics> out;
  out.reserve(base_urls.size());
  for (std::size_t i = 0; i < base_urls.size(); ++i) {
    const auto failed = [&](std::string why) {
      core::NodeMetrics m;
      m.node = url_host(base_urls[i]);
      m.source = "agent";
      m.agent_url = platform::url_for_display(base_urls[i]);
      m.error = fmt::format("{}: {}", m.agent_url, why);
      out.push_back(std::move(m));
    };
    auto& oc = outcomes[i];
    if (!oc.ok()) {
      failed(oc.error().message);
      continue;
    }
    if (oc.response().status != 200) {
      failed(fmt::format("HTTP {}", oc.response().status));
      continue;
    }
    auto doc = parse_agent_document(oc.response().body, base_urls[i]);
    if (!doc) {
      failed(doc.error().message);
      continue;
    }
    out.push_back(std::move(*doc));
  }
  return out;
}

}  // namespace gf::cluster
