#pragma once
// Text rendering for the terminal: gpustat-like status lines, the process table, run statistics.
#include <string>
#include <vector>

#include "core/snapshot.hpp"
#include "core/stats.hpp"

namespace gf::app {

struct Style {
  bool color = false;
  std::string paint(const std::string& text, const char* sgr) const;  // sgr: "1;32" etc.
};

// Lines of the status view: header, one line per GPU, then warnings. No trailing newlines.
std::vector<std::string> render_status(const core::Snapshot& s, const std::string& host, const Style& st);
// One line explaining the status view's n/a cells, e.g. "n/a: fan not supported on GPU 0,1; power limit
// no permission on GPU 3"; empty when every shown value is there. GPUs that are lost or failed are left
// out (their own line says why).
std::string missing_legend(const core::Snapshot& s);
// Lines of the process table, biggest first, with "other / not attributed" memory per GPU.
std::vector<std::string> render_processes(const core::Snapshot& s, const Style& st);
// Lines summarising a monitored run.
std::vector<std::string> render_report(const core::RunReport& r, const Style& st);

std::string hostname();

}  // namespace gf::app
