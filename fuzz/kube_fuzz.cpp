// libFuzzer target for the Kubernetes client's parsers of outside input: NodeList and PodList JSON
// (what an API server, or anything answering in its place, sends), resource quantities, base64 and
// kubeconfig YAML (a file a user hands us). The first byte picks the parser; the rest is its input.
// Crashes, sanitizer reports and the invariant traps below are findings.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/kube_client.hpp"
#include "cluster/kubeconfig.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 53;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace cl = gf::cluster;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      if (auto page = cl::parse_node_list(text)) {
        for (const auto& n : page->nodes) {
          check(!n.name.empty());
          check(n.gpu_capacity <= kMaxCount && n.gpu_allocatable <= kMaxCount);
          check(n.gpu_resource.empty() || n.gpu_resource == cl::kNvidiaGpu || n.gpu_resource == cl::kAmdGpu);
          check(n.gpu_requested == 0);
          for (const char c : n.name) check(static_cast<unsigned char>(c) >= 0x20);
        }
        // Summing pods into these nodes never exceeds the cap either.
        auto nodes = page->nodes;
        cl::PodGpuRequest pod;
        pod.node = nodes.empty() ? "x" : nodes.front().name;
        pod.phase = "Running";
        pod.gpus = {{std::string(cl::kNvidiaGpu), kMaxCount}, {std::string(cl::kAmdGpu), kMaxCount}};
        cl::add_pod_requests(nodes, {pod, pod});
        for (const auto& n : nodes) check(n.gpu_requested <= kMaxCount);
      }
      break;
    }
    case 1: {
      if (auto page = cl::parse_pod_list(text)) {
        for (const auto& p : page->pods) {
          check(!p.gpus.empty());
          for (const auto& [res, n] : p.gpus) check(n > 0 && n <= kMaxCount);
        }
      }
      break;
    }
    case 2: {
      if (auto q = cl::parse_quantity_count(text)) check(*q <= kMaxCount);
      break;
    }
    case 3: {
      if (auto d = cl::decode_base64(text)) check(d->size() <= text.size());
      break;
    }
    case 4: {
      if (auto c = cl::parse_kube_config(text, "/nonexistent/kubeconfig")) {
        check(c->server.starts_with("http://") || c->server.starts_with("https://"));
        check(!c->namespace_.empty());
      }
      break;
    }
  }
  return 0;
}
