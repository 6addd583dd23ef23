#include "core/alerts.hpp"

#include "core/gpu_health.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace gf::core {
namespace {

constexpr std::size_t kind_index(AlertKind k) noexcept { return static_cast<std::size_t>(k); }

// Numbers for people, independent of the global locale (std::to_chars is always "C"): at most one
// decimal, none when whole — "88", "97.5".
std::string num(double v) {
  if (!std::isfinite(v)) return "?";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 1);
  if (ec != std::errc{}) return "?";
  std::string s(buf, end);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

std::string num(std::uint64_t v) { return std::to_string(v); }

std::string errors(std::uint64_t n) {
  return num(n) + (n == 1 ? " new uncorrected ECC error" : " new uncorrected ECC errors");
}

std::string seconds(std::chrono::milliseconds d) { return num(static_cast<double>(d.count()) / 1000.0) + " s"; }

// " for 60 s", or nothing for a rule that fires at once.
std::string held_for(const AlertRule& r) { return r.duration.count() > 0 ? " for " + seconds(r.duration) : ""; }

std::string gpu_label(const GpuReading& g) { return "GPU " + std::to_string(g.index); }

std::string gpu_key(const GpuReading& g) { return g.uuid.empty() ? "gpu-" + std::to_string(g.index) : g.uuid; }

std::uint64_t reason_mask(const AlertRule& r) {
  return r.threshold > 0 && r.threshold < 18446744073709551616.0 ? static_cast<std::uint64_t>(r.threshold) : 0;
}

std::string reason_list(std::uint64_t mask) {
  std::string out;
  for (auto n : clock_event_names(mask)) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out.empty() ? "mask " + num(mask) : out;
}

Alert new_alert(const AlertRule& rule, const GpuReading& g, const std::string& key, const Snapshot& s, double value,
                std::string message) {
  Alert a;
  a.id = std::string(event_name(rule.kind)) + ":" + key;
  a.kind = rule.kind;
  a.gpu_index = g.index;
  a.gpu_uuid = g.uuid;
  a.severity = rule.severity;
  a.message = std::move(message);
  a.value = value;
  a.threshold = rule.threshold;
  a.started_at = s.timestamp;
  return a;
}

}  // namespace

std::string_view event_name(AlertKind k) noexcept {
  switch (k) {
    case AlertKind::HighGpuUsage: return "high_gpu_usage_alert";
    case AlertKind::HighTemperature: return "high_temperature_alert";
    case AlertKind::HighMemoryUsage: return "high_memory_usage_alert";
    case AlertKind::PowerNearLimit: return "power_limit_alert";
    case AlertKind::GpuLost: return "gpu_lost_alert";
    case AlertKind::EccErrors: return "ecc_error_alert";
    case AlertKind::Throttling: return "throttling_alert";
    case AlertKind::XidErrors: return "xid_error_alert";
    case AlertKind::RowRemapFailure: return "row_remap_failure_alert";
  }
  return "alert";
}

std::string_view rule_name(AlertKind k) noexcept {
  switch (k) {
    case AlertKind::HighGpuUsage: return "high_gpu_usage";
    case AlertKind::HighTemperature: return "temperature";
    case AlertKind::HighMemoryUsage: return "memory_usage";
    case AlertKind::PowerNearLimit: return "power_limit";
    case AlertKind::GpuLost: return "gpu_lost";
    case AlertKind::EccErrors: return "ecc_errors";
    case AlertKind::Throttling: return "throttling";
    case AlertKind::XidErrors: return "xid_errors";
    case AlertKind::RowRemapFailure: return "row_remap_failure";
  }
  return "alert";
}

std::optional<AlertKind> alert_kind_from_name(std::string_view name) noexcept {
  constexpr std::string_view suffix = "_alert";
  for (AlertKind k : kAlertKinds) {
    const std::string_view ev = event_name(k);
    if (name == rule_name(k) || name == ev || name == ev.substr(0, ev.size() - suffix.size())) return k;
  }
  return std::nullopt;
}

bool AlertQuery::matches(const Alert& a) const noexcept {
  if (gpu && a.gpu_index != *gpu) return false;
  if (until && a.started_at >= *until) return false;
  if (since && a.resolved_at && *a.resolved_at < *since) return false;
  return true;
}

AlertRule default_alert_rule(AlertKind k) {
  using std::chrono::seconds;
  AlertRule r;
  r.kind = k;
  switch (k) {
    case AlertKind::HighGpuUsage:
      r.threshold = 50;
      r.duration = seconds(30);
      break;
    case AlertKind::HighTemperature:
      r.threshold = 85;
      r.duration = seconds(60);
      r.severity = "critical";
      break;
    case AlertKind::HighMemoryUsage:
    case AlertKind::PowerNearLimit:
      r.threshold = 95;
      r.duration = seconds(60);
      break;
    case AlertKind::GpuLost:
    case AlertKind::XidErrors:
    case AlertKind::RowRemapFailure: r.severity = "critical"; break;
    case AlertKind::EccErrors:
      r.threshold = 1;
      r.duration = seconds(300);
      r.severity = "critical";
      break;
    case AlertKind::Throttling:
      r.threshold = static_cast<double>(kThrottleReasonsMask);
      r.duration = seconds(60);
      break;
  }
  return r;
}

std::vector<AlertRule> default_alert_rules() {
  std::vector<AlertRule> out;
  for (AlertKind k : kAlertKinds) out.push_back(default_alert_rule(k));
  return out;
}

// What one sample says about one rule. Unknown leaves every state as it is.
struct AlertEngine::Verdict {
  enum class State : unsigned char { Unknown, Holds, Clear };
  State state = State::Unknown;
  double value = 0;
  std::string message;  // Holds: why it fires; Clear: why it resolved
};

AlertEngine::AlertEngine(std::vector<AlertRule> rules) : rules_(std::move(rules)) {
  rule_pos_.fill(rules_.size());
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const AlertRule& r = rules_[i];
    if (r.duration.count() < 0)
      throw std::invalid_argument("alert rule " + std::string(rule_name(r.kind)) + ": negative duration");
    auto& pos = rule_pos_[kind_index(r.kind)];
    if (pos != rules_.size())
      throw std::invalid_argument("alert rule " + std::string(rule_name(r.kind)) + " given twice");
    pos = i;
  }
}

AlertEngine::Verdict AlertEngine::judge(const AlertRule& rule, const GpuReading& g) {
  using State = Verdict::State;
  Verdict v;
  const std::string who = gpu_label(g);
  if (rule.kind == AlertKind::GpuLost) {
    if (g.health == Health::Lost) {
      v = {State::Holds, 1,
           who + (g.uuid.empty() ? "" : " (" + g.uuid + ")") + " lost" +
               (g.health_message.empty() ? "" : ": " + g.health_message)};
    } else {
      v = {State::Clear, 0, who + " is reported again (health " + std::string(to_string(g.health)) + ")"};
    }
    return v;
  }
  if (g.health != Health::Ok) return v;  // its readings say nothing

  const std::string thr = num(rule.threshold);
  switch (rule.kind) {
    case AlertKind::HighGpuUsage: {
      if (!g.utilization_pct) break;
      const double u = *g.utilization_pct;
      const std::string base = who + " utilization " + num(u) + " %, ";
      if (u > rule.threshold)
        v = {State::Holds, u, base + "above " + thr + " %" + held_for(rule)};
      else
        v = {State::Clear, u, base + "no longer above " + thr + " %"};
      break;
    }
    case AlertKind::HighTemperature: {
      if (!g.temperature_c) break;
      const double t = *g.temperature_c;
      const std::string base = who + " temperature " + num(t) + " °C, ";
      if (t >= rule.threshold)
        v = {State::Holds, t, base + "at or above " + thr + " °C" + held_for(rule)};
      else
        v = {State::Clear, t, base + "back below " + thr + " °C"};
      break;
    }
    case AlertKind::HighMemoryUsage: {
      if (!g.memory_used_mib || !g.memory_total_mib || *g.memory_total_mib == 0) break;
      const double pct = 100.0 * static_cast<double>(*g.memory_used_mib) / static_cast<double>(*g.memory_total_mib);
      const std::string base = who + " memory " + num(pct) + " % used (" + num(*g.memory_used_mib) + " of " +
                               num(*g.memory_total_mib) + " MiB), ";
      if (pct >= rule.threshold)
        v = {State::Holds, pct, base + "at or above " + thr + " %" + held_for(rule)};
      else
        v = {State::Clear, pct, base + "back below " + thr + " %"};
      break;
    }
    case AlertKind::PowerNearLimit: {
      if (!g.power_draw_w || !g.power_limit_w || !(*g.power_limit_w > 0)) break;
      const double pct = 100.0 * *g.power_draw_w / *g.power_limit_w;
      const std::string base = who + " power draw " + num(*g.power_draw_w) + " W, " + num(pct) + " % of its " +
                               num(*g.power_limit_w) + " W limit, ";
      if (pct >= rule.threshold)
        v = {State::Holds, pct, base + "at or above " + thr + " %" + held_for(rule)};
      else
        v = {State::Clear, pct, base + "back below " + thr + " %"};
      break;
    }
    case AlertKind::Throttling: {
      if (!g.clock_event_reasons) break;
      const std::uint64_t hit = *g.clock_event_reasons & reason_mask(rule);
      if (hit != 0)
        v = {State::Holds, static_cast<double>(hit),
             who + " clocks throttled (" + reason_list(hit) + ")" + held_for(rule)};
      else
        v = {State::Clear, 0, who + " clocks no longer throttled"};
      break;
    }
    case AlertKind::XidErrors: {
      // Newest first: the alert names the latest critical XID.
      const XidEvent* critical = nullptr;
      for (auto it = g.recent_xids.rbegin(); it != g.recent_xids.rend() && !critical; ++it)
        if (xid_needs_reset(it->xid)) critical = &*it;
      if (critical) {
        const auto what = xid_description(critical->xid);
        v = {State::Holds, static_cast<double>(critical->xid),
             who + " had XID " + num(std::uint64_t{critical->xid}) +
                 (what.empty() ? "" : " (" + std::string(what) + ")") +
                 ": it needs a reset or an operator's attention"};
      } else if (g.last_xid) {  // events work here and list no critical XID
        v = {State::Clear, 0, who + " lists no critical XID"};
      }
      break;
    }
    case AlertKind::RowRemapFailure: {
      if (!g.remapped_rows_failure) break;
      if (*g.remapped_rows_failure)
        v = {State::Holds, 1, who + " failed to remap a memory row: the GPU needs service"};
      else
        v = {State::Clear, 0, who + " reports no row-remap failure"};
      break;
    }
    case AlertKind::GpuLost:
    case AlertKind::EccErrors:  // stateful, see apply_ecc
      break;
  }
  return v;
}

void AlertEngine::apply(const AlertRule& rule, const Verdict& v, const GpuReading& g, GpuState& st, const Snapshot& s,
                        SteadyTime now, std::vector<AlertEvent>& out) {
  RuleState& rs = st.rules[kind_index(rule.kind)];
  switch (v.state) {
    case Verdict::State::Unknown: return;
    case Verdict::State::Clear:
      rs.pending_since.reset();
      if (rs.firing) {
        Alert a = std::move(*rs.firing);
        rs.firing.reset();
        a.gpu_index = g.index;
        a.value = v.value;
        a.message = v.message;
        a.resolved_at = s.timestamp;
        out.push_back({AlertEvent::Type::Resolved, std::move(a)});
      }
      return;
    case Verdict::State::Holds: break;
  }
  if (rs.firing) {  // same episode: keep the figures current, say nothing
    rs.firing->gpu_index = g.index;
    rs.firing->value = v.value;
    rs.firing->message = v.message;
    return;
  }
  if (!rs.pending_since) rs.pending_since = now;
  if (now - *rs.pending_since < rule.duration) return;
  rs.pending_since.reset();
  Alert a = new_alert(rule, g, st.key, s, v.value, v.message);
  rs.firing = a;
  out.push_back({AlertEvent::Type::Fired, std::move(a)});
}

void AlertEngine::apply_ecc(const AlertRule& rule, const GpuReading& g, GpuState& st, const Snapshot& s, SteadyTime now,
                            std::vector<AlertEvent>& out) {
  // The volatile count, or the lifetime one on a GPU that keeps no volatile count.
  const Reading<std::uint64_t>& counter = g.ecc_uncorrected_volatile || !g.ecc_uncorrected_aggregate
                                              ? g.ecc_uncorrected_volatile
                                              : g.ecc_uncorrected_aggregate;
  if (g.health != Health::Ok || !counter) return;  // unknown: keep the baseline
  const std::uint64_t count = *counter;
  const std::optional<std::uint64_t> last = std::exchange(st.ecc_last, count);
  // No baseline yet, or the counter went back (driver reload, GPU reset): nothing to compare.
  const std::uint64_t rise = last && count > *last ? count - *last : 0;
  RuleState& rs = st.rules[kind_index(AlertKind::EccErrors)];
  const std::string who = gpu_label(g);
  const std::string total =
      std::string(&counter == &g.ecc_uncorrected_volatile ? " (volatile count " : " (lifetime count ") + num(count) +
      ")";
  if (rise > 0 && rs.firing) {  // same episode: count the new errors, restart the quiet period
    st.ecc_last_increase = now;
    rs.firing->gpu_index = g.index;
    rs.firing->value += static_cast<double>(rise);
    rs.firing->message = who + ": " + errors(static_cast<std::uint64_t>(rs.firing->value)) + total;
    return;
  }
  if (rise > 0 && static_cast<double>(rise) >= rule.threshold) {
    st.ecc_last_increase = now;
    Alert a = new_alert(rule, g, st.key, s, static_cast<double>(rise), who + ": " + errors(rise) + total);
    rs.firing = a;
    out.push_back({AlertEvent::Type::Fired, std::move(a)});
    return;
  }
  if (rs.firing && (!st.ecc_last_increase || now - *st.ecc_last_increase >= rule.duration)) {
    Alert a = std::move(*rs.firing);
    rs.firing.reset();
    a.gpu_index = g.index;
    a.message = who + ": no new uncorrected ECC errors for " + seconds(rule.duration) + ", " + num(a.value) +
                " in this episode" + total;
    a.resolved_at = s.timestamp;
    out.push_back({AlertEvent::Type::Resolved, std::move(a)});
  }
}

std::vector<AlertEvent> AlertEngine::evaluate(const Snapshot& s, SteadyTime now) {
  std::vector<AlertEvent> out;
  std::vector<std::string> seen;
  for (const GpuReading& g : s.gpus) {
    std::string key = gpu_key(g);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;  // listed twice: the first counts
    GpuState& st = gpus_[key];
    st.index = g.index;
    st.key = key;
    seen.push_back(std::move(key));
    for (const AlertRule& rule : rules_) {
      if (!rule.enabled) continue;
      if (rule.kind == AlertKind::EccErrors)
        apply_ecc(rule, g, st, s, now, out);
      else
        apply(rule, judge(rule, g), g, st, s, now, out);
    }
  }

  // GPUs no longer listed: nothing more will be learnt about their conditions, so their alerts end —
  // except a lost GPU, which is still lost.
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    if (std::find(seen.begin(), seen.end(), it->first) != seen.end()) {
      ++it;
      continue;
    }
    GpuState& st = it->second;
    bool still_lost = false;
    for (const AlertRule& rule : rules_) {
      RuleState& rs = st.rules[kind_index(rule.kind)];
      rs.pending_since.reset();
      if (!rs.firing) continue;
      if (rule.kind == AlertKind::GpuLost) {
        still_lost = true;
        continue;
      }
      Alert a = std::move(*rs.firing);
      rs.firing.reset();
      a.message = "GPU " + std::to_string(st.index) + " is no longer reported; alert resolved";
      a.resolved_at = s.timestamp;
      out.push_back({AlertEvent::Type::Resolved, std::move(a)});
    }
    if (still_lost) {
      st.ecc_last.reset();
      st.ecc_last_increase.reset();
      ++it;
    } else {
      it = gpus_.erase(it);
    }
  }
  return out;
}

std::vector<Alert> AlertEngine::firing() const {
  std::vector<Alert> out;
  for (const auto& [key, st] : gpus_)
    for (const RuleState& rs : st.rules)
      if (rs.firing) out.push_back(*rs.firing);
  std::sort(out.begin(), out.end(), [this](const Alert& a, const Alert& b) {
    return std::tuple(a.gpu_index, rule_pos_[kind_index(a.kind)], a.id) <
           std::tuple(b.gpu_index, rule_pos_[kind_index(b.kind)], b.id);
  });
  return out;
}

}  // namespace gf::core
