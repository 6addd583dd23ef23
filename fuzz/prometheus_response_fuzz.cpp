// libFuzzer target for the fleet sources' parsers of answers from other servers: Prometheus' instant-query
// JSON (and the join of answers into nodes), a gpufleet agent's gpu-metrics document, agent lists and
// ISO 8601 times. A Prometheus or an agent may be misconfigured, old, or hostile.
// Crashes, sanitizer reports and the invariant traps below are findings.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "allocator/node_rank.hpp"
#include "cluster/agent_source.hpp"
#include "cluster/prometheus_source.hpp"
#include "wire/time.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace cl = gf::cluster;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::size_t series = 0;
  if (auto r = cl::parse_instant_query(text)) {
    for (const auto& s : *r) check(std::isfinite(s.value));
    series = r->size();
    // The same answer for every metric: every GPU found has each value the answer gave it.
    cl::PromAnswers a;
    a.utilization = a.fb_used = a.fb_free = a.temperature = a.power = a.sample_time = a.gpu_sample_time = a.health = *r;
    const auto f = cl::join_answers(a, "Hostname");
    std::size_t gpus = 0;
    for (const auto& n : f.nodes) {
      check(!n.node.empty());
      for (const auto& g : n.gpus) check(g.node == n.node && g.utilization_pct.has_value());
      gpus += n.gpus.size();
    }
    check(gpus <= series);
    gf::core::FleetFacts facts;
    facts.metrics = f.nodes;
    const auto sums = gf::allocator::summarize(facts, {});
    for (const auto& n : sums.nodes) check(n.idle_gpu_count <= n.total_gpus && n.gpus_with_metrics <= n.total_gpus);
    (void)gf::allocator::select_node(sums, 1, gf::allocator::Fallback::LeastLoaded);
  }
  if (auto m = cl::parse_agent_document(text, "http://fuzz:9401")) {
    check(!m->node.empty());
    for (const auto& g : m->gpus) check(!g.utilization_pct || std::isfinite(*g.utilization_pct));
  }
  if (auto l = cl::parse_agent_list(text, "fuzz")) {
    for (const auto& u : *l) check(u.rfind("http", 0) == 0 && !cl::url_host(u).empty());
  }
  (void)gf::wire::parse_iso8601(text);
  return 0;
}
