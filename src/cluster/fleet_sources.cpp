// Fleet source settings and one round of gathering (see fleet_sources.hpp).
#include "cluster/fleet_sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cluster/agent_source.hpp"
#include "cluster/prometheus_source.hpp"
#include "platform/fs.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

using json = nlohmann::json;

Result<double> number(const json& v, const std::string& where, double min, double max) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < min || v.get<double>() > max)
    return make_error(fmt::format("{}: expected a number from {:g} to {:g}", where, min, max));
  return v.get<double>();
}

Result<std::string> text(const json& v, const std::string& where) {
  if (!v.is_string()) return make_error(where + ": expected a string");
  return v.get<std::string>();
}

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000)));
}

Result<std::string> read_small_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("cannot read {} {}: {}", what, path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().size() > (4u << 20)) return make_error(fmt::format("{} {} is larger than 4 MiB", what, path));
  return ss.str();
}

// The exec source for the Kubernetes GPU nodes that no other source describes. Its metrics go after
// the working sources' and before the failed ones' (the first entry of a node is the one used).
void exec_round(const FleetSources& s, core::FleetFacts& f) {
  std::set<std::string_view> described;
  for (const auto& m : f.metrics)
    if (m.error.empty()) described.insert(m.node);
  std::vector<core::KubeNode> wanted;
  for (const auto& n : *f.kube)
    if (!n.gpu_resource.empty() && !described.contains(n.name)) wanted.push_back(n);
  if (wanted.empty()) return;
  auto r = s.exec_metrics(wanted);
  if (!r) {
    f.source_errors.push_back("exec: " + r.error().message);
    return;
  }
  for (auto& m : *r) f.metrics.push_back(std::move(m));
  std::stable_partition(f.metrics.begin(), f.metrics.end(), [](const core::NodeMetrics& m) { return m.error.empty(); });
}

}  // namespace

std::vector<std::string> FleetSources::describe() const {
  std::vector<std::string> d;
  if (kube_nodes) {
    const std::string insecure = kube_insecure.empty() ? "" : "insecure";
    const std::string inside =
        kube_description.empty() || insecure.empty() ? kube_description + insecure : kube_description + "; " + insecure;
    d.push_back(inside.empty() ? std::string("kubernetes") : "kubernetes (" + inside + ")");
  }
  if (!prometheus_url.empty())
    d.push_back(fmt::format("prometheus {} (node label {}{})", platform::url_for_display(prometheus_url), node_label,
                            prometheus_insecure().empty() ? "" : "; insecure"));
  if (!agents_file.empty()) d.push_back("agents file " + agents_file);
  if (!agents.empty()) d.push_back(fmt::format("{} agent(s)", agents.size()));
  if (exec_metrics)
    d.push_back(
        fmt::format("nvidia-smi through pods/exec ({} at once, {} ms each)", exec_parallel, exec_timeout.count()));
  return d;
}

std::string FleetSources::prometheus_insecure() const {
  if (prometheus_url.empty() || !platform::url_is_plain_http(prometheus_url)) return {};
  const std::string shown = platform::url_for_display(prometheus_url);
  if (!prometheus_token_file.empty()) return "sending a bearer token over plain http to " + shown + " (prometheus)";
  if (platform::url_has_userinfo(prometheus_url))
    return "sending the URL's user name and password over plain http to " + shown + " (prometheus)";
  return {};
}

std::vector<std::string> FleetSources::insecure_warnings() const {
  std::vector<std::string> w;
  if (kube_nodes && !kube_insecure.empty()) w.push_back(kube_insecure);
  if (auto p = prometheus_insecure(); !p.empty()) w.push_back(std::move(p));
  return w;
}

std::vector<std::string> insecure_warnings_for(const FleetSources& s, const core::FleetFacts& f) {
  std::vector<std::string> w;
  if (f.kube_error && s.kube_nodes && !s.kube_insecure.empty()) w.push_back(s.kube_insecure);
  const bool prometheus_failed = std::any_of(f.source_errors.begin(), f.source_errors.end(),
                                             [](const std::string& e) { return e.rfind("prometheus ", 0) == 0; });
  if (auto p = s.prometheus_insecure(); prometheus_failed && !p.empty()) w.push_back(std::move(p));
  return w;
}

Result<std::string> read_prometheus_token(const std::string& path, bool* readable_by_others) {
  platform::TokenFileRules rules;
  rules.follow_links = true;
  rules.root_may_own = true;
  auto t = platform::read_token_file(path, rules);
  if (!t) return t.error();
  if (readable_by_others) *readable_by_others = t->readable_by_others;
  return std::move(t->token);
}

Result<std::vector<std::string>> check_prometheus_token(const FleetSources& s) {
  std::vector<std::string> warnings;
  if (s.prometheus_token_file.empty()) return warnings;
  if (s.prometheus_url.empty())
    return make_error(ErrorKind::Usage, "a Prometheus token file (" + s.prometheus_token_file +
                                            ") is given without a Prometheus URL (--prometheus, \"prometheus\")");
  bool shared = false;
  auto t = read_prometheus_token(s.prometheus_token_file, &shared);
  if (!t) return make_error(t.error().kind, "prometheus: " + t.error().message);
  // A warning, not a refusal: Kubernetes mounts secrets 0644 by default, and whoever can read the file
  // can already use the token; only a file others could write is refused (they would choose the token).
  if (shared)
    warnings.push_back("the Prometheus token file " + s.prometheus_token_file +
                       " can be read by other users (chmod 600 it)");
  return warnings;
}

Result<allocator::Fallback> parse_fallback(const std::string& t) {
  if (t == "none") return allocator::Fallback::None;
  if (t == "least-loaded" || t == "least_loaded") return allocator::Fallback::LeastLoaded;
  return make_error(fmt::format("fallback '{}': expected none or least-loaded", t));
}

Result<FleetSources> fleet_sources_from_json(const std::string& body, const std::string& source, FleetSources s) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return make_error(source + ": not valid JSON");
  if (!j.is_object()) return make_error(source + ": expected a JSON object");
  std::optional<bool> kube_switch;  // "kubernetes": true/false, checked against the other keys at the end
  bool kube_keys = false;
  auto kube = [&s]() -> KubeSourceSettings& {
    if (!s.kubernetes) s.kubernetes.emplace();
    return *s.kubernetes;
  };
  for (const auto& [key, v] : j.items()) {
    const std::string where = source + ": " + key;
    if (key == "prometheus") {
      auto t = text(v, where);
      if (!t) return t.error();
      s.prometheus_url = *t;
    } else if (key == "node_label") {
      auto t = text(v, where);
      if (!t) return t.error();
      if (!valid_label_name(*t)) return make_error(where + ": not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)");
      s.node_label = *t;
    } else if (key == "max_age_s" || key == "timeout_s" || key == "refresh_interval_s") {
      auto n = number(v, where, key == "max_age_s" ? 0 : 0.1, 86400);
      if (!n) return n.error();
      (key == "max_age_s" ? s.max_age : key == "timeout_s" ? s.timeout : s.refresh) = ms(*n);
    } else if (key == "agents_file" || key == "prometheus_token_file") {
      auto t = text(v, where);
      if (!t) return t.error();
      if (t->empty() && key == "prometheus_token_file") return make_error(where + ": must not be empty");
      std::filesystem::path p(*t);
      if (p.is_relative()) p = std::filesystem::path(source).parent_path() / p;
      (key == "agents_file" ? s.agents_file : s.prometheus_token_file) = p.string();
    } else if (key == "agents") {
      if (!v.is_array()) return make_error(where + ": expected an array of URLs");
      for (const auto& u : v) {
        auto t = text(u, where);
        if (!t) return t.error();
        auto n = normalize_agent_url(*t);
        if (!n) return make_error(where + ": " + n.error().message);
        s.agents.push_back(*n);
      }
    } else if (key == "utilization_threshold" || key == "memory_threshold") {
      auto n = number(v, where, 0, 100);
      if (!n) return n.error();
      (key == "utilization_threshold" ? s.idle.utilization_pct : s.idle.memory_pct) = *n;
    } else if (key == "fallback") {
      auto t = text(v, where);
      if (!t) return t.error();
      auto f = parse_fallback(*t);
      if (!f) return make_error(where + ": " + f.error().message);
      s.fallback = *f;
    } else if (key == "exec_nvidia_smi") {
      if (!v.is_boolean()) return make_error(where + ": expected true or false");
      s.exec_nvidia_smi = v.get<bool>();
    } else if (key == "exec_parallel") {
      auto n = number(v, where, 1, 64);
      if (!n) return n.error();
      if (*n != std::floor(*n)) return make_error(where + ": expected a whole number from 1 to 64");
      s.exec_parallel = static_cast<unsigned>(*n);
    } else if (key == "exec_timeout_s") {
      auto n = number(v, where, 0.1, 600);
      if (!n) return n.error();
      s.exec_timeout = ms(*n);
    } else if (key == "kubernetes" || key == "in_cluster") {
      if (!v.is_boolean()) return make_error(where + ": expected true or false");
      if (key == "kubernetes") {
        kube_switch = v.get<bool>();
      } else if (v.get<bool>()) {
        kube().in_cluster = true;
        kube_keys = true;
      }
    } else if (key == "kubeconfig" || key == "context") {
      auto t = text(v, where);
      if (!t) return t.error();
      if (t->empty()) return make_error(where + ": must not be empty");
      if (key == "context") {
        kube().context = *t;
      } else {
        std::filesystem::path p(*t);
        if (p.is_relative()) p = std::filesystem::path(source).parent_path() / p;
        kube().kubeconfig = p.string();
      }
      kube_keys = true;
    } else {
      return make_error(fmt::format(
          "{}: unknown key '{}' (known: prometheus, prometheus_token_file, node_label, max_age_s, agents_file, agents, "
          "timeout_s, refresh_interval_s, utilization_threshold, memory_threshold, fallback, "
          "kubernetes, kubeconfig, context, in_cluster, exec_nvidia_smi, exec_parallel, exec_timeout_s)",
          source, key));
    }
  }
  if (kube_switch == false) {
    if (kube_keys) return make_error(source + ": kubernetes is false but kubeconfig, context or in_cluster is given");
    s.kubernetes.reset();
    s.kubernetes_off = true;
  } else if (kube_switch == true || kube_keys) {
    kube();
    s.kubernetes_off = false;
  }
  return s;
}

Result<FleetSources> load_fleet_sources(const std::string& path, FleetSources base) {
  auto body = read_small_file(path, "the cluster config");
  if (!body) return body.error();
  return fleet_sources_from_json(*body, path, std::move(base));
}

Result<core::FleetFacts> gather_fleet(const FleetSources& s, std::chrono::system_clock::time_point now) {
  if (!s.any())
    return make_error(
        "no fleet source: give --kubeconfig FILE (or --in-cluster), --prometheus URL, --agents FILE or --agent URL "
        "(or --config FILE)");
  std::vector<std::string> agents = s.agents;
  if (!s.agents_file.empty()) {
    auto body = read_small_file(s.agents_file, "the agents file");
    if (!body) return body.error();
    auto list = parse_agent_list(*body, s.agents_file);
    if (!list) return list.error();
    for (auto& u : *list)
      if (std::find(agents.begin(), agents.end(), u) == agents.end()) agents.push_back(std::move(u));
  }

  core::FleetFacts f;
  // Prometheus and Kubernetes run beside the agents' fetch (each is a few requests that wait on the network).
  std::future<Result<PromFleet>> prom;
  std::optional<std::string> token_error;
  if (!s.prometheus_url.empty()) {
    PrometheusOptions po;
    po.url = s.prometheus_url;
    po.node_label = s.node_label;
    po.timeout = s.timeout;
    po.display_metrics = s.display_metrics;
    // Read every round, so that a rotated token is picked up as the kubeconfig's tokenFile is.
    if (!s.prometheus_token_file.empty()) {
      auto t = read_prometheus_token(s.prometheus_token_file);
      if (t)
        po.bearer_token = std::move(*t);
      else
        token_error = fmt::format("prometheus {}: {}", platform::url_for_display(s.prometheus_url), t.error().message);
    }
    if (!token_error) prom = std::async(std::launch::async, [po] { return query_prometheus(po); });
  }
  std::future<Result<std::vector<core::KubeNode>>> kube;
  if (s.kube_nodes) kube = std::async(std::launch::async, s.kube_nodes);
  std::vector<core::NodeMetrics> from_agents;
  if (!agents.empty()) from_agents = fetch_agents(agents, s.timeout);

  for (auto& m : from_agents)
    if (m.error.empty()) f.metrics.push_back(std::move(m));
  if (prom.valid()) {
    auto r = prom.get();
    if (r) {
      for (auto& m : r->nodes) f.metrics.push_back(std::move(m));
      for (auto& w : r->warnings)
        f.source_errors.push_back("prometheus " + platform::url_for_display(s.prometheus_url) + ": " + w);
    } else {
      f.source_errors.push_back(r.error().message);
    }
  }
  if (token_error) f.source_errors.push_back(std::move(*token_error));
  for (auto& m : from_agents)
    if (!m.error.empty()) {
      f.source_errors.push_back("agent " + m.error);
      f.metrics.push_back(std::move(m));
    }
  if (kube.valid()) {
    auto r = kube.get();
    if (r) {
      f.kube = std::move(*r);
      if (s.exec_metrics) exec_round(s, f);
    } else {
      f.kube_error = "kubernetes: " + r.error().message;
      f.source_errors.push_back(*f.kube_error);
    }
  }
  f.collected = now;
  return f;
}

}  // namespace gf::cluster
