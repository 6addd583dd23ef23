// nvidia-smi through pods/exec as a fleet source (see exec_source.hpp).
#include "cluster/exec_source.hpp"

#include "platform/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace gf::cluster {
namespace nsmi = backends::nvidia_smi;

std::vector<std::string> exec_nvidia_smi_command(std::span<const nsmi::Field> columns) {
  return {"nvidia-smi", "--query-gpu=" + nsmi::join_fields(columns), "--format=csv,noheader,nounits"};
}

std::vector<ExecTarget> choose_exec_targets(const std::vector<core::KubeNode>& nodes,
                                            const std::vector<PodGpuRequest>& pods) {
  std::vector<const PodGpuRequest*> usable;
  for (const auto& p : pods) {
    const auto it = p.gpus.find(std::string(kNvidiaGpu));
    if (p.phase == "Running" && !p.node.empty() && it != p.gpus.end() && it->second > 0 && !p.gpu_container.empty() &&
        p.gpu_container_running && !p.namespace_.empty() && !p.name.empty())
      usable.push_back(&p);
  }
  std::sort(usable.begin(), usable.end(), [](const PodGpuRequest* a, const PodGpuRequest* b) {
    return std::tie(a->node, a->namespace_, a->name) < std::tie(b->node, b->namespace_, b->name);
  });
  std::vector<ExecTarget> out;
  for (const auto& n : nodes) {
    if (n.gpu_resource != kNvidiaGpu) continue;
    const auto it = std::lower_bound(usable.begin(), usable.end(), n.name,
                                     [](const PodGpuRequest* p, const std::string& node) { return p->node < node; });
    if (it == usable.end() || (*it)->node != n.name) continue;
    out.push_back({n.name, (*it)->namespace_, (*it)->name, (*it)->gpu_container});
  }
  return out;
}

core::NodeMetrics exec_node_metrics(const std::string& node, const nsmi::GpuTable& table,
                                    std::chrono::system_clock::time_point observed) {
  core::NodeMetrics m;
  m.node = node;
  m.source = "exec";
  m.gpu_resource = std::string(kNvidiaGpu);
  m.observed = observed;
  for (const auto& g : table.gpus) {
    core::FleetGpu f;
    f.node = node;
    f.index = g.index;
    f.uuid = g.uuid;
    f.model = g.name;
    if (g.utilization_pct) f.utilization_pct = static_cast<double>(*g.utilization_pct);
    if (g.memory_used_mib) f.memory_used_mib = static_cast<double>(*g.memory_used_mib);
    if (g.memory_total_mib) f.memory_total_mib = static_cast<double>(*g.memory_total_mib);
    if (g.temperature_c) f.temperature_c = static_cast<double>(*g.temperature_c);
    if (g.power_draw_w) f.power_w = *g.power_draw_w;
    m.gpus.push_back(std::move(f));
  }
  return m;
}

core::NodeMetrics exec_target_metrics(const ExecTarget& t, const ExecRunner& run, const ExecSourceOptions& o,
                                      const std::function<std::chrono::system_clock::time_point()>& now) {
  const std::string where = fmt::format("exec in pod {}", platform::printable(t.namespace_ + "/" + t.pod, 320));
  auto failed = [&](std::string why) {
    core::NodeMetrics m;
    m.node = t.node;
    m.source = "exec";
    m.gpu_resource = std::string(kNvidiaGpu);
    m.error = where + ": " + why;
    return m;
  };
  const std::span<const nsmi::Field> lists[] = {nsmi::current_fields(), nsmi::throttle_fields(), nsmi::basic_fields()};
  for (const auto columns : lists) {
    ExecRequest rq;
    rq.namespace_ = t.namespace_;
    rq.pod = t.pod;
    rq.container = t.container;
    rq.command = exec_nvidia_smi_command(columns);
    rq.timeout = o.timeout;
    rq.max_output_bytes = o.max_output_bytes;
    Result<ExecOutput> r = make_error("not run");
    try {
      r = run(rq);
    } catch (const std::exception& e) {
      return failed(std::string("exec failed: ") + e.what());
    }
    if (!r) return failed(r.error().message);
    const ExecOutput& out = *r;
    if (!out.status.success) {
      // nvidia-smi of an older driver rejects a field of the newer list: ask with the next one.
      if (nsmi::rejected_field(out.out) || nsmi::rejected_field(out.err)) continue;
      std::string why = out.status.exit_code ? fmt::format("nvidia-smi exited with {}", *out.status.exit_code)
                                             : fmt::format("the command failed ({})",
                                                           out.status.reason.empty() ? std::string("no reason given")
                                                                                     : out.status.reason);
      if (!out.status.message.empty() && !out.status.exit_code) why += ": " + out.status.message;
      const std::string said = !out.err.empty() ? out.err : out.out;
      if (!said.empty()) why += ": " + platform::printable(said.substr(0, said.find('\n')), 200);
      return failed(std::move(why));
    }
    if (out.out_truncated) return failed(fmt::format("nvidia-smi printed more than {} bytes", o.max_output_bytes));
    auto table = nsmi::parse_gpu_lines(out.out, columns);
    if (!table) return failed("nvidia-smi printed something unexpected: " + table.error().message);
    if (table->gpus.empty()) return failed("nvidia-smi listed no GPU");
    return exec_node_metrics(t.node, *table, now());
  }
  return failed("nvidia-smi accepts none of the known --query-gpu field lists");
}

std::vector<core::NodeMetrics> exec_fleet(const std::vector<ExecTarget>& targets, const ExecRunner& run,
                                          const ExecSourceOptions& o,
                                          const std::function<std::chrono::system_clock::time_point()>& now) {
  std::vector<core::NodeMetrics> out(targets.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < targets.size(); i = next++) out[i] = exec_target_metrics(targets[i], run, o, now);
  };
  const std::size_t threads = std::min<std::size_t>(std::clamp(o.parallel, 1u, 64u), targets.size());
  {
    std::vector<std::jthread> pool;
    pool.reserve(threads);
    for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
    if (threads > 0) worker();  // this thread is one of the workers
  }
  return out;
}

}  // namespace gf::cluster
