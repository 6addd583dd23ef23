// gpufleet agents → per-node GPU metrics (see agent_source.hpp).
#include "cluster/agent_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "platform/http_client.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

using json = nlohmann::json;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A finite number, or nullopt for null/absent/anything else.
std::optional<double> num(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string str(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int to_int(std::string_view s) {
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

Result<std::string> normalize_agent_url(std::string_view url) {
  std::string u(trim(url));
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
    line = trim(line);
    if (line.empty()) continue;
    auto u = normalize_agent_url(line);
    if (!u) return make_error(fmt::format("{}:{}: {}", source, line_no, u.error().message));
    if (std::find(out.begin(), out.end(), *u) == out.end()) out.push_back(std::move(*u));
  }
  return out;
}

Result<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view t) {
  // YYYY-MM-DDTHH:MM:SS[.f…]Z
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != ' ') || t[13] != ':' || t[16] != ':' ||
      t.back() != 'Z' || !digits(t.substr(0, 4)) || !digits(t.substr(5, 2)) || !digits(t.substr(8, 2)) ||
      !digits(t.substr(11, 2)) || !digits(t.substr(14, 2)) || !digits(t.substr(17, 2)))
    return make_error(fmt::format("'{}' is not an ISO 8601 UTC time", t));
  std::chrono::microseconds frac{0};
  const std::string_view tail = t.substr(19, t.size() - 20);
  if (!tail.empty()) {
    if (tail[0] != '.' || !digits(tail.substr(1)) || tail.size() > 10)
      return make_error(fmt::format("'{}' is not an ISO 8601 UTC time", t));
    std::string f(tail.substr(1));
    f.resize(6, '0');
    frac = std::chrono::microseconds(to_int(f));
  }
  using namespace std::chrono;
  const year_month_day ymd{year(to_int(t.substr(0, 4))), month(static_cast<unsigned>(to_int(t.substr(5, 2)))),
                           day(static_cast<unsigned>(to_int(t.substr(8, 2))))};
  const int hh = to_int(t.substr(11, 2)), mm = to_int(t.substr(14, 2)), ss = to_int(t.substr(17, 2));
  if (!ymd.ok() || hh > 23 || mm > 59 || ss > 60) return make_error(fmt::format("'{}' is not a valid time", t));
  return time_point_cast<system_clock::duration>(sys_days(ymd) + hours(hh) + minutes(mm) + seconds(ss) + frac);
}

Result<core::NodeMetrics> parse_agent_document(std::string_view body, std::string_view base_url) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error("the gpu-metrics answer is not a JSON object");
  const auto gpus = j.find("gpus");
  if (gpus == j.end() || !gpus->is_array()) return make_error("the gpu-metrics answer has no \"gpus\" array");
  core::NodeMetrics m;
  m.source = "agent";
  m.agent_url = platform::url_for_display(base_url);  // a password in the URL stays in the request
  if (const auto b = str(j, "backend"); b == "nvml" || b == "nvidia-smi")
    m.gpu_resource = "nvidia.com/gpu";
  else if (b == "amdgpu")
    m.gpu_resource = "amd.com/gpu";
  m.node = str(j, "node");
  if (m.node.empty()) m.node = url_host(base_url);
  if (const auto ts = str(j, "timestamp"); !ts.empty()) {
    auto t = parse_iso8601_utc(ts);
    if (!t) return make_error("\"timestamp\": " + t.error().message);
    m.observed = *t;
  }
  m.gpus.reserve(gpus->size());
  for (const auto& g : *gpus) {
    if (!g.is_object()) return make_error("a GPU entry is not an object");
    core::FleetGpu f;
    f.node = m.node;
    const auto idx = g.find("index");
    if (idx == g.end() || !idx->is_number_unsigned() || idx->get<std::uint64_t>() > (1u << 20))
      return make_error("a GPU entry has no valid \"index\"");
    f.index = idx->get<unsigned>();
    f.uuid = str(g, "uuid");
    f.model = str(g, "name");
    f.utilization_pct = num(g, "utilization");
    if (const auto mem = g.find("memory"); mem != g.end() && mem->is_object()) {
      f.memory_used_mib = num(*mem, "used");
      f.memory_total_mib = num(*mem, "total");
    }
    f.temperature_c = num(g, "temperature");
    f.power_w = num(g, "power_usage");
    if (const auto h = g.find("healthy"); h != g.end() && h->is_boolean() && !h->get<bool>()) {
      // The first problem's sentence, bounded: it is another machine's text.
      std::string why = "unhealthy";
      if (const auto p = g.find("health_problems"); p != g.end() && p->is_array() && !p->empty())
        if (const auto& first = (*p)[0]; first.is_object()) why = str(first, "message");
      f.unhealthy = why.empty() ? "unhealthy" : why.substr(0, 200);
    }
    m.gpus.push_back(std::move(f));
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
