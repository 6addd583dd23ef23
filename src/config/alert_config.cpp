#include "config/alert_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

namespace gf::config {
namespace {

using nlohmann::json;

// Doubles hold integers exactly up to 2^53; a bit mask or error count beyond that is a typo.
constexpr double kMaxExactInteger = 9007199254740992.0;
// Ten years: long enough for anyone, short enough that milliseconds fit in 64 bits.
constexpr double kMaxDurationS = 10.0 * 365 * 24 * 3600;

std::string known_rules() {
  std::string out;
  for (core::AlertKind k : core::kAlertKinds) {
    if (!out.empty()) out += ", ";
    out += core::rule_name(k);
  }
  return out;
}

// The reason bit named `name` (one of core::clock_event_names), or nullopt.
std::optional<std::uint64_t> reason_bit(std::string_view name) {
  for (unsigned i = 0; i < 64; ++i) {
    const std::uint64_t bit = std::uint64_t{1} << i;
    for (auto n : core::clock_event_names(bit))
      if (n == name) return bit;
  }
  return std::nullopt;
}

std::string known_reasons() {
  std::string out;
  for (unsigned i = 0; i < 64; ++i)
    for (auto n : core::clock_event_names(std::uint64_t{1} << i)) {
      if (!out.empty()) out += ", ";
      out += n;
    }
  return out;
}

Error at(const std::string& key, const std::string& what) { return make_error(fmt::format("{}: {}", key, what)); }

Error wrong_type(const std::string& key, std::string_view expected, const json& got) {
  return at(key, fmt::format("expected {}, got {}", expected, got.type_name()));
}

bool is_integer(double v) { return std::floor(v) == v; }

Result<void> check_threshold(core::AlertKind kind, const std::string& key, double v) {
  if (!std::isfinite(v)) return at(key, "must be a finite number");
  switch (kind) {
    case core::AlertKind::HighGpuUsage:
    case core::AlertKind::HighMemoryUsage:
      if (v < 0 || v > 100) return at(key, fmt::format("a percentage, 0 to 100, got {}", v));
      break;
    case core::AlertKind::PowerNearLimit:
      if (v <= 0) return at(key, fmt::format("a percentage of the power limit above 0, got {}", v));
      break;
    case core::AlertKind::HighTemperature: break;
    case core::AlertKind::GpuLost:
      return at(key, "gpu_lost has no threshold (it fires when the driver reports the GPU lost)");
    case core::AlertKind::XidErrors:
      return at(key, "xid_errors has no threshold (it fires on XID 48, 62, 64, 74, 79, 95, 119 or 120)");
    case core::AlertKind::RowRemapFailure:
      return at(key, "row_remap_failure has no threshold (it fires when the GPU reports a failed row remap)");
    case core::AlertKind::EccErrors:
      if (v < 1 || !is_integer(v) || v > kMaxExactInteger)
        return at(key, fmt::format("a whole number of new errors, at least 1, got {}", v));
      break;
    case core::AlertKind::Throttling:
      if (v < 1 || !is_integer(v) || v > kMaxExactInteger)
        return at(key, fmt::format("a clock-event reason bit mask (a positive integer), got {}", v));
      break;
  }
  return {};
}

Result<double> parse_reasons(const std::string& key, const json& j) {
  if (!j.is_array()) return wrong_type(key, "an array of reason names", j);
  if (j.empty()) return at(key, "name at least one reason (or disable the rule)");
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string item_key = fmt::format("{}[{}]", key, i);
    if (!j[i].is_string()) return wrong_type(item_key, "a string", j[i]);
    const auto bit = reason_bit(j[i].get_ref<const std::string&>());
    if (!bit)
      return at(item_key,
                fmt::format("unknown reason \"{}\" (known: {})", j[i].get_ref<const std::string&>(), known_reasons()));
    mask |= *bit;
  }
  return static_cast<double>(mask);
}

Result<void> parse_rule(const std::string& key, const json& j, core::AlertRule& rule) {
  if (j.is_boolean()) {
    rule.enabled = j.get<bool>();
    return {};
  }
  if (!j.is_object()) return wrong_type(key, "an object or a boolean", j);
  if (j.contains("threshold") && j.contains("reasons")) return at(key, "give either threshold or reasons, not both");
  for (const auto& [field, v] : j.items()) {
    const std::string fkey = key + "." + field;
    if (field == "enabled") {
      if (!v.is_boolean()) return wrong_type(fkey, "a boolean", v);
      rule.enabled = v.get<bool>();
    } else if (field == "threshold") {
      if (!v.is_number()) return wrong_type(fkey, "a number", v);
      const double t = v.get<double>();
      if (auto ok = check_threshold(rule.kind, fkey, t); !ok) return ok.error();
      rule.threshold = t;
    } else if (field == "duration_s") {
      if (!v.is_number()) return wrong_type(fkey, "a number of seconds", v);
      const double d = v.get<double>();
      if (!std::isfinite(d) || d < 0 || d > kMaxDurationS)
        return at(fkey, fmt::format("seconds, 0 or more (at most ten years), got {}", d));
      rule.duration = std::chrono::milliseconds(std::llround(d * 1000.0));
    } else if (field == "severity") {
      if (!v.is_string()) return wrong_type(fkey, "a string", v);
      const auto& sev = v.get_ref<const std::string&>();
      if (sev != "warning" && sev != "critical")
        return at(fkey, fmt::format("\"warning\" or \"critical\", got \"{}\"", sev));
      rule.severity = sev;
    } else if (field == "reasons" && rule.kind == core::AlertKind::Throttling) {
      auto mask = parse_reasons(fkey, v);
      if (!mask) return mask.error();
      rule.threshold = *mask;
    } else {
      return at(fkey, rule.kind == core::AlertKind::Throttling
                          ? "unknown field (known: enabled, threshold, reasons, duration_s, severity)"
                          : "unknown field (known: enabled, threshold, duration_s, severity)");
    }
  }
  return {};
}

}  // namespace

Result<std::vector<core::AlertRule>> parse_alert_rules(const json& section) {
  std::vector<core::AlertRule> rules = core::default_alert_rules();
  if (section.is_null()) return rules;
  if (!section.is_object()) return wrong_type("alerts", "an object", section);
  std::array<std::optional<std::string>, core::kAlertKinds.size()> given;  // the key each kind came from
  for (const auto& [name, body] : section.items()) {
    const std::string key = "alerts." + name;
    const auto kind = core::alert_kind_from_name(name);
    if (!kind) return at(key, fmt::format("unknown alert rule (known: {})", known_rules()));
    auto& from = given[static_cast<std::size_t>(*kind)];
    if (from) return at(key, fmt::format("the same rule as alerts.{}; give it once", *from));
    from = name;
    auto rule = std::find_if(rules.begin(), rules.end(), [&](const core::AlertRule& r) { return r.kind == *kind; });
    if (auto ok = parse_rule(key, body, *rule); !ok) return ok.error();
  }
  return rules;
}

}  // namespace gf::config
