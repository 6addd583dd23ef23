#include "allocator/mig_select.hpp"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "core/mig.hpp"

namespace gf::allocator {
namespace {

constexpr std::size_t kMaxProfileLength = 32;
constexpr std::size_t kRefusalsShown = 8;

bool offers_instances(const core::GpuReading& g) {
  return g.health == core::Health::Ok && g.mig_enabled.value_or(false);
}

// Processes the driver attributes to instance `m` of `g`, other than ours.
std::vector<std::string> foreign_in(const core::GpuReading& g, const core::MigInstance& m,
                                    const std::set<std::uint32_t>& own) {
  std::vector<std::string> out;
  for (const auto& p : g.processes) {
    if (own.contains(p.pid) || core::mig_instance_of(g, p) != &m) continue;
    out.push_back(p.name.empty() ? fmt::format("pid {}", p.pid) : fmt::format("pid {} ({})", p.pid, p.name));
  }
  return out;
}

}  // namespace

bool valid_mig_profile(std::string_view profile) noexcept {
  if (profile.empty() || profile.size() > kMaxProfileLength) return false;
  for (const char c : profile)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '+')) return false;
  return true;
}

bool has_mig_profile(const core::Snapshot& s, std::string_view profile) noexcept {
  for (const auto& g : s.gpus)
    for (const auto& m : g.mig_instances)
      if (m.profile == profile) return true;
  return false;
}

std::string mig_profiles_text(const core::Snapshot& s) {
  std::map<std::string, unsigned> count;
  for (const auto& g : s.gpus)
    for (const auto& m : g.mig_instances) ++count[m.profile.empty() ? "?" : m.profile];
  if (count.empty()) return "none";
  std::vector<std::string> parts;
  for (const auto& [p, n] : count) parts.push_back(n > 1 ? fmt::format("{} ×{}", p, n) : p);
  return fmt::format("{}", fmt::join(parts, ", "));
}

Result<MigPick> select_mig_instance(const core::Snapshot& s, const MigRequest& r) {
  if (!valid_mig_profile(r.need.mig_profile))
    return make_error(ErrorKind::Invalid, "a MIG profile is written like 1g.10gb or 3g.40gb");
  std::vector<std::string> refused;
  std::size_t hidden = 0;
  auto refuse = [&](std::string text) {
    if (refused.size() < kRefusalsShown)
      refused.push_back(std::move(text));
    else
      ++hidden;
  };
  for (const auto& g : s.gpus) {
    for (const auto& m : g.mig_instances) {
      if (m.profile != r.need.mig_profile) continue;
      const std::string who = fmt::format("GPU {} {} (GI {})", g.index, m.uuid, m.gpu_instance_id);
      if (!offers_instances(g)) {
        refuse(fmt::format("{}: its GPU is {}", who,
                           g.health == core::Health::Ok ? "not in MIG mode" : core::to_string(g.health)));
        continue;
      }
      if (r.leased_uuids.contains(m.uuid)) {
        refuse(who + ": leased");
        continue;
      }
      if (!r.need.allow_busy)
        if (auto busy = foreign_in(g, m, r.own_pids); !busy.empty()) {
          refuse(fmt::format("{}: busy: {}", who, fmt::join(busy, ", ")));
          continue;
        }
      MigPick pick;
      pick.gpu_index = g.index;
      pick.instance = m;
      pick.selection.indices = {g.index};
      pick.selection.method = "MIG instance";
      pick.selection.why = {fmt::format("MIG {} instance {} of GPU {} (GPU instance {}, compute instance {})",
                                        m.profile, m.uuid, g.index, m.gpu_instance_id, m.compute_instance_id)};
      return pick;
    }
  }
  if (refused.empty())
    return make_error(ErrorKind::Unavailable, fmt::format("no MIG instance of profile {} on this node (its MIG "
                                                          "instances: {})",
                                                          r.need.mig_profile, mig_profiles_text(s)));
  std::string text =
      fmt::format("no free MIG instance of profile {}: {}", r.need.mig_profile, fmt::join(refused, "; "));
  if (hidden > 0) text += fmt::format("; and {} more", hidden);
  return make_error(ErrorKind::Unavailable, std::move(text));
}

}  // namespace gf::allocator
