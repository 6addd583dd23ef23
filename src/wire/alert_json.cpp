#include "wire/alert_json.hpp"

#include <cmath>
#include <string>

#include "wire/json.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

// Doubles hold integers exactly up to 2^53: a throttling value beyond that names no reasons.
constexpr double kMaxExactInteger = 9007199254740992.0;

}  // namespace

json alert_json(const core::Alert& a) {
  json j{{"id", a.id},
         {"kind", std::string(core::event_name(a.kind))},
         {"event", std::string(core::event_name(a.kind))},
         {"rule", std::string(core::rule_name(a.kind))},
         {"gpu_index", a.gpu_index},
         {"gpu_uuid", a.gpu_uuid.empty() ? json(nullptr) : json(a.gpu_uuid)},
         {"severity", a.severity},
         {"message", a.message},
         {"value", round_to(a.value, 2)},
         {"threshold", round_to(a.threshold, 2)},
         {"state", a.resolved_at ? "resolved" : "firing"},
         {"started_at", iso8601(a.started_at)},
         {"resolved_at", a.resolved_at ? json(iso8601(*a.resolved_at)) : json(nullptr)}};
  if (a.kind == core::AlertKind::Throttling) {
    json reasons = json::array();
    if (a.value >= 1 && a.value <= kMaxExactInteger)
      for (auto n : core::clock_event_names(static_cast<std::uint64_t>(a.value))) reasons.push_back(std::string(n));
    j["reasons"] = std::move(reasons);
  }
  return j;
}

json alert_event_json(const core::AlertEvent& e) {
  return json{{"event", std::string(core::event_name(e.alert.kind))}, {"data", alert_json(e.alert)}};
}

}  // namespace gf::wire
