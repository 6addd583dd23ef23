// A stand-in Kubernetes API server (tests/fakes/kube_standin.*) with NODES GPU nodes, each with one
// running GPU pod whose pods/exec answers the recorded 8-GPU H100 nvidia-smi CSV after DELAY_MS (a
// real exec through kubelet and the runtime, plus nvidia-smi itself, takes a few hundred ms). Prints
// its URL and serves until stdin closes. For bench/exec_bench.sh.
//   gf_exec_standin NODES DELAY_MS CSV_FILE
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/text.hpp"
#include "fakes/exec_fixture.hpp"
#include "fakes/kube_standin.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: gf_exec_standin NODES DELAY_MS CSV_FILE\n";
    return 2;
  }
  const auto nodes = gf::core::parse_uint(argv[1], 1, 100000);
  const auto delay_ms = gf::core::parse_uint(argv[2], 0, 600000);
  if (!nodes || !delay_ms) {
    std::cerr << "gf_exec_standin: NODES and DELAY_MS are whole numbers\n";
    return 2;
  }
  std::ifstream f(argv[3], std::ios::binary);
  std::stringstream csv;
  csv << f.rdbuf();
  if (csv.str().empty()) {
    std::cerr << "gf_exec_standin: cannot read " << argv[3] << "\n";
    return 2;
  }
  gf::fakes::KubeStandinConfig cfg;
  cfg.fixture_json = gf::fakes::exec_cluster_json(static_cast<unsigned>(*nodes));
  cfg.token = "bench";
  gf::fakes::KubeStandinExec e;
  e.out = csv.str();
  e.delay_ms = static_cast<unsigned>(*delay_ms);
  cfg.exec_default = e;
  gf::fakes::KubeStandin kube(cfg);
  std::cout << kube.url() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  std::cerr << "gf_exec_standin: " << kube.exec_calls().size() << " exec(s), at most " << kube.max_concurrent_execs()
            << " at once\n";
  return 0;
}
