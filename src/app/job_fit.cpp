#include "app/job_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "node/arbiter.hpp"
#include "wire/agent_docs.hpp"

namespace gf::app {
namespace {

using nlohmann::json;

constexpr std::size_t kCommandBudget = 2048;
constexpr std::size_t kErrorBudget = 1024;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// s cut to at most n bytes, never inside a UTF-8 sequence.
std::string cut(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// Every array in one GPU's series ({"t": [...], "utilization": [...], ...}) cut to n points evenly
// spaced over the original, the first and the last among them.
json thinned(const json& gpu, std::size_t n) {
  json out = json::object();
  for (const auto& [key, values] : gpu.items()) {
    if (!values.is_array() || values.size() <= n || n < 2) {
      out[key] = values;
      continue;
    }
    json kept = json::array();
    const std::size_t last = values.size() - 1;
    for (std::size_t i = 0; i < n; ++i) kept.push_back(values[(i * last + (n - 1) / 2) / (n - 1)]);
    out[key] = std::move(kept);
  }
  return out;
}

std::size_t points_of(const json& series) {
  std::size_t most = 0;
  for (const auto& [index, gpu] : series.items())
    if (gpu.is_object())
      for (const auto& [key, values] : gpu.items())
        if (values.is_array()) most = std::max(most, values.size());
  return most;
}

// The command as an array of strings, cut to kCommandBudget bytes in all; false when it was short enough.
bool shorten_command(json& cmd) {
  if (!cmd.is_array()) return false;
  std::size_t total = 0;
  for (const auto& a : cmd) total += a.is_string() ? a.get_ref<const std::string&>().size() : dump(a).size();
  if (total <= kCommandBudget) return false;
  json out = json::array();
  std::size_t used = 0;
  for (const auto& a : cmd) {
    const std::string s = a.is_string() ? a.get<std::string>() : dump(a);
    if (used + s.size() > kCommandBudget) {
      out.push_back(cut(s, kCommandBudget - used));
      break;
    }
    used += s.size();
    out.push_back(s);
  }
  out.push_back(fmt::format("… ({} more bytes left out)", total - std::min(total, kCommandBudget)));
  cmd = std::move(out);
  return true;
}

}  // namespace

std::size_t agent_job_budget() { return node::Arbiter::kMaxUserRecordBytes - 512; }

bool fit_job_document(core::Job& job, std::size_t limit) {
  if (wire::job_document_bytes(job) <= limit) return true;
  json rec = json::parse(job.record, nullptr, false);
  if (!rec.is_object()) return false;
  auto fits = [&] {
    job.record = dump(rec);
    return wire::job_document_bytes(job) <= limit;
  };

  // A command line past 2 KiB is cut first: the chart of a run needs its points more than anyone needs
  // the tail of a long argument list.
  bool cut_command = false;
  if (auto c = rec.find("command"); c != rec.end()) cut_command = shorten_command(*c);
  if (json column = json::parse(job.command, nullptr, false); shorten_command(column)) {
    job.command = dump(column);
    cut_command = true;
  }
  if (cut_command) {
    rec["command_truncated"] = true;
    if (fits()) return true;
  }

  json* mon = nullptr;
  if (auto m = rec.find("metrics"); m != rec.end() && m->is_object())
    if (auto g = m->find("gpu_monitoring"); g != m->end() && g->is_object()) mon = &*g;

  // Then the profiling (GPM) statistics shrink to the mean of each activity ratio (what the record is read
  // for: how much of the utilization was SM, tensor, DRAM work); the full statistics and the PCIe/NVLink
  // throughput (~1 KiB per Hopper GPU in all) go before a chart loses points.
  if (mon && mon->contains("gpu_stats") && (*mon)["gpu_stats"].is_object()) {
    bool summarised = false;
    for (auto& [index, gpu] : (*mon)["gpu_stats"].items()) {
      if (!gpu.is_object() || !gpu.contains("profiling") || !gpu["profiling"].is_object()) continue;
      json means = json::object();
      for (const auto& [key, stats] : gpu["profiling"].items()) {
        if (key == "note") {
          means[key] = stats;
        } else if (stats.is_object() && stats.contains("mean") && stats["mean"].is_number() && key.size() > 7 &&
                   key.compare(key.size() - 7, 7, "_active") == 0) {
          means[key] = std::round(stats["mean"].get<double>() * 1000) / 1000;
        } else if (key == "sm_occupancy" && stats.is_object() && stats.contains("mean") && stats["mean"].is_number()) {
          means[key] = std::round(stats["mean"].get<double>() * 1000) / 1000;
        }
      }
      if (means != gpu["profiling"]) {
        gpu["profiling"] = std::move(means);
        summarised = true;
      }
    }
    if (summarised) {
      (*mon)["profiling_summarised"] =
          "activity means only: the run's record would pass the agent's limit on a user's job record";
      if (fits()) return true;
    }
  }

  if (mon && mon->contains("series") && (*mon)["series"].is_object()) {
    const json full = (*mon)["series"];
    const std::size_t points = points_of(full);
    auto thin_to = [&](std::size_t n) {
      json series = json::object();
      for (const auto& [index, gpu] : full.items()) series[index] = gpu.is_object() ? thinned(gpu, n) : gpu;
      (*mon)["series"] = std::move(series);
      (*mon)["series_thinned_from"] = points;
      return fits();
    };
    // The most points that fit, found by halving the range: every point of the whole series did not fit
    // (we are here), two did; the size grows with the points kept.
    if (points > 2 && thin_to(2)) {
      std::size_t fit = 2, too_many = points;
      while (too_many - fit > 1) {
        const std::size_t mid = fit + (too_many - fit) / 2;
        if (thin_to(mid))
          fit = mid;
        else
          too_many = mid;
      }
      if (thin_to(fit)) return true;
    }
    mon->erase("series");
    mon->erase("series_thinned_from");
    (*mon)["series_omitted"] = "the run's record would pass the agent's limit on a user's job record";
    if (fits()) return true;
  }

  for (json* holder : {&rec, rec.contains("docker") && rec["docker"].is_object() ? &rec["docker"] : nullptr}) {
    if (!holder) continue;
    if (auto e = holder->find("error");
        e != holder->end() && e->is_string() && e->get_ref<const std::string&>().size() > kErrorBudget)
      *e = cut(e->get<std::string>(), kErrorBudget) + "…";
  }
  return fits();
}

}  // namespace gf::app
