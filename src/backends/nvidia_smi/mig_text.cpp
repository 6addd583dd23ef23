#include "backends/nvidia_smi/mig_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <limits>

#include "core/text.hpp"
#include "platform/log.hpp"

namespace gf::backends::nvidia_smi {
namespace {

using core::Absent;
using core::Reading;

constexpr std::size_t kMaxText = 96;  // a UUID or profile longer than NVML's own buffers is not one
constexpr std::size_t kMaxDepth = 32;

using core::trim;

// A whole unsigned decimal of type T (blanks around it allowed); nullopt otherwise.
template <class T>
std::optional<T> number(std::string_view s) {
  auto v = core::parse_uint(trim(s), 0, std::numeric_limits<T>::max());
  if (!v) return std::nullopt;
  return static_cast<T>(*v);
}

// One printable line for an error message.
std::string shown(std::string_view line) { return platform::printable(line, 120); }

bool plain_token(std::string_view s) {
  if (s.empty() || s.size() > kMaxText) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// "MIG-GPU-<uuid>/<gi>/<ci>": the ids of the old form; nullopt for the current "MIG-<uuid>".
void legacy_ids(ListedMig& m) {
  if (m.uuid.rfind("MIG-GPU-", 0) != 0) return;
  const auto ci_at = m.uuid.rfind('/');
  if (ci_at == std::string::npos || ci_at == 0) return;
  const auto gi_at = m.uuid.rfind('/', ci_at - 1);
  if (gi_at == std::string::npos) return;
  auto gi = number<unsigned>(std::string_view(m.uuid).substr(gi_at + 1, ci_at - gi_at - 1));
  auto ci = number<unsigned>(std::string_view(m.uuid).substr(ci_at + 1));
  if (gi && ci) {
    m.gpu_instance_id = gi;
    m.compute_instance_id = ci;
  }
}

// "(UUID: X)" at the end of a line: X.
std::optional<std::string_view> uuid_in(std::string_view line) {
  const auto at = line.rfind("(UUID: ");
  if (at == std::string_view::npos || line.empty() || line.back() != ')') return std::nullopt;
  auto uuid = line.substr(at + 7, line.size() - at - 8);
  if (!plain_token(uuid)) return std::nullopt;
  return uuid;
}

Reading<std::uint64_t> mib(std::string_view text) {
  text = trim(text);
  if (text.size() > 4 && text.substr(text.size() - 4) == " MiB") text.remove_suffix(4);
  if (auto v = number<std::uint64_t>(text)) return *v;
  if (text == "N/A" || text == "[N/A]") return Reading<std::uint64_t>::absent(Absent::Unavailable);
  if (text.find("Not Supported") != std::string_view::npos) return Reading<std::uint64_t>::absent(Absent::NotSupported);
  return Reading<std::uint64_t>::absent(Absent::Error);
}

// "1234 us" (or a bare count): the count; N/A and "Not Supported" as their reasons.
Reading<std::uint64_t> counter(std::string_view text) {
  text = trim(text);
  if (text.size() > 3 && text.substr(text.size() - 3) == " us") text.remove_suffix(3);
  if (auto v = number<std::uint64_t>(text)) return *v;
  if (text == "N/A" || text == "[N/A]") return Reading<std::uint64_t>::absent(Absent::Unavailable);
  if (text.find("Not Supported") != std::string_view::npos) return Reading<std::uint64_t>::absent(Absent::NotSupported);
  return Reading<std::uint64_t>::absent(Absent::Error);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Result<std::vector<ListedGpu>> parse_list(std::string_view text) {
  std::vector<ListedGpu> out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const std::string_view line = trim(raw);
    if (line.rfind("GPU ", 0) == 0) {
      const auto colon = line.find(':');
      auto index = colon == std::string_view::npos ? std::nullopt : number<unsigned>(line.substr(4, colon - 4));
      auto uuid = uuid_in(line);
      if (!index || !uuid) return make_error(fmt::format("nvidia-smi -L: cannot read the GPU line '{}'", shown(line)));
      if (out.size() >= kMaxListedGpus) return make_error("nvidia-smi -L: more GPUs than any machine has");
      out.push_back({*index, std::string(*uuid), {}});
    } else if (line.rfind("MIG ", 0) == 0) {
      // MIG <profile> Device <n>: (UUID: <uuid>)
      std::string_view rest = trim(line.substr(4));
      const auto space = rest.find(' ');
      const std::string_view profile = rest.substr(0, space);
      rest = trim(rest.substr(space == std::string_view::npos ? rest.size() : space));
      const auto colon = rest.find(':');
      std::optional<unsigned> device;
      if (rest.rfind("Device", 0) == 0 && colon != std::string_view::npos)
        device = number<unsigned>(rest.substr(6, colon - 6));
      auto uuid = uuid_in(rest);
      if (out.empty() || !plain_token(profile) || !device || !uuid)
        return make_error(fmt::format("nvidia-smi -L: cannot read the MIG line '{}'", shown(line)));
      auto& migs = out.back().migs;
      if (migs.size() >= kMaxMigPerGpu) return make_error("nvidia-smi -L: more MIG devices than a GPU has");
      ListedMig m{std::string(profile), *device, std::string(*uuid), std::nullopt, std::nullopt};
      legacy_ids(m);
      migs.push_back(std::move(m));
    }
  }
  return out;
}

namespace {

// The elements open from the root down; at most kMaxDepth.
struct XmlPath {
  std::array<std::string_view, kMaxDepth> stack{};
  std::size_t depth = 0;
  bool at(std::initializer_list<std::string_view> path) const {
    if (path.size() != depth) return false;
    std::size_t i = 0;
    for (auto p : path)
      if (stack[i++] != p) return false;
    return true;
  }
};

// The text of the leaf element `name` that just closed (still on `x`): the fields the parser keeps.
void take_leaf(const XmlPath& x, std::string_view name, std::string_view value, std::vector<XmlGpu>& gpus) {
  XmlGpu* g = gpus.empty() ? nullptr : &gpus.back();
  if (g == nullptr) return;
  const auto& stack = x.stack;
  if (x.at({"nvidia_smi_log", "gpu", "uuid"}) && plain_token(value)) {
    g->uuid = std::string(value);
  } else if (x.at({"nvidia_smi_log", "gpu", "pci", "replay_counter"})) {
    g->pcie_replay_count = counter(value);
  } else if (x.depth == 4 && ends_with(stack[2], "reasons_counters")) {
    // <clocks_event_reasons_counters><clocks_event_reasons_counters_sw_power_cap>0 us</…>
    if (ends_with(name, "_sw_power_cap")) g->power_violation_us = counter(value);
    if (ends_with(name, "_sw_therm_slowdown")) g->thermal_violation_us = counter(value);
  } else if (!g->migs.empty() && x.depth >= 5 && stack[2] == "mig_devices" && stack[3] == "mig_device") {
    XmlMig& m = g->migs.back();
    if (x.at({"nvidia_smi_log", "gpu", "mig_devices", "mig_device", "index"})) {
      m.index = number<unsigned>(value).value_or(kMaxMigPerGpu);  // an unreadable index joins nothing
    } else if (x.at({"nvidia_smi_log", "gpu", "mig_devices", "mig_device", "gpu_instance_id"})) {
      m.gpu_instance_id = number<unsigned>(value);
    } else if (x.at({"nvidia_smi_log", "gpu", "mig_devices", "mig_device", "compute_instance_id"})) {
      m.compute_instance_id = number<unsigned>(value);
    } else if (x.depth == 6 && stack[4] == "fb_memory_usage") {
      if (name == "total") m.memory_total_mib = mib(value);
      if (name == "used") m.memory_used_mib = mib(value);
      if (name == "free") m.memory_free_mib = mib(value);
    }
  } else if (!g->processes.empty() && x.depth == 5 && stack[2] == "processes" && stack[3] == "process_info") {
    XmlProcess& p = g->processes.back();
    if (name == "pid") p.pid = number<std::uint32_t>(value).value_or(0);
    if (name == "gpu_instance_id") p.gpu_instance_id = number<unsigned>(value);
    if (name == "compute_instance_id") p.compute_instance_id = number<unsigned>(value);
  }
}

// The element just opened (the last on `x`) starts a record when it is a GPU, a MIG device or a process.
Result<void> start_record(const XmlPath& x, std::vector<XmlGpu>& gpus) {
  if (x.at({"nvidia_smi_log", "gpu"})) {
    if (gpus.size() >= kMaxListedGpus) return make_error("nvidia-smi -q -x: more GPUs than any machine has");
    XmlGpu& g = gpus.emplace_back();
    for (auto* r : {&g.pcie_replay_count, &g.power_violation_us, &g.thermal_violation_us})
      *r = Reading<std::uint64_t>::absent(Absent::NotSupported);
  } else if (!gpus.empty() && x.at({"nvidia_smi_log", "gpu", "mig_devices", "mig_device"})) {
    if (gpus.back().migs.size() >= kMaxMigPerGpu) return make_error("nvidia-smi -q -x: too many MIG devices");
    XmlMig m;
    for (auto* r : {&m.memory_total_mib, &m.memory_used_mib, &m.memory_free_mib})
      *r = Reading<std::uint64_t>::absent(Absent::Unavailable);
    gpus.back().migs.push_back(m);
  } else if (!gpus.empty() && x.at({"nvidia_smi_log", "gpu", "processes", "process_info"})) {
    if (gpus.back().processes.size() >= kMaxXmlProcessesPerGpu)
      return make_error("nvidia-smi -q -x: too many processes");
    gpus.back().processes.emplace_back();
  }
  return {};
}

}  // namespace

Result<std::vector<XmlGpu>> parse_query_xml(std::string_view xml) {
  std::vector<XmlGpu> gpus;
  XmlPath x;
  bool saw_root = false;
  std::size_t text_from = 0;  // where the text of the element opened last begins
  bool leaf = false;          // no child opened since the last open tag
  std::size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string_view::npos) {
    const std::size_t lt = pos;
    const auto gt = xml.find('>', lt);
    if (gt == std::string_view::npos) return make_error("nvidia-smi -q -x: a tag is not closed");
    pos = gt + 1;
    std::string_view tag = xml.substr(lt + 1, gt - lt - 1);
    if (tag.empty()) return make_error("nvidia-smi -q -x: an empty tag");
    if (tag.front() == '?' || tag.front() == '!') continue;  // declaration, doctype, comment (no '>' inside)
    if (tag.front() == '/') {
      const std::string_view name = trim(tag.substr(1));
      if (x.depth == 0 || x.stack[x.depth - 1] != name)
        return make_error(fmt::format("nvidia-smi -q -x: unexpected </{}>", shown(name)));
      if (leaf) take_leaf(x, name, trim(xml.substr(text_from, lt - text_from)), gpus);
      --x.depth;
      leaf = false;
      continue;
    }
    // An open tag: its name ends at the first blank; "<x/>" opens and closes at once.
    const bool self_closing = tag.back() == '/';
    std::string_view name = tag.substr(0, tag.find_first_of(" \t\r\n/"));
    if (name.empty()) return make_error("nvidia-smi -q -x: a tag without a name");
    if (self_closing) continue;
    if (x.depth == 0) {
      if (name != "nvidia_smi_log") return make_error("nvidia-smi -q -x: not nvidia-smi's XML");
      saw_root = true;
    }
    if (x.depth >= kMaxDepth) return make_error("nvidia-smi -q -x: elements nested too deep");
    x.stack[x.depth++] = name;
    leaf = true;
    text_from = pos;
    if (auto r = start_record(x, gpus); !r) return r.error();
  }
  if (!saw_root) return make_error("nvidia-smi -q -x: not nvidia-smi's XML");
  if (x.depth != 0) return make_error("nvidia-smi -q -x: the document ends inside an element");
  return gpus;
}

std::vector<std::string> add_mig_instances(std::vector<core::GpuReading>& gpus, const std::vector<ListedGpu>& listed,
                                           const std::vector<XmlGpu>& xml) {
  std::vector<std::string> problems;
  for (auto& g : gpus) {
    if (g.uuid.empty() || !g.mig_enabled.value_or(false)) continue;
    const auto l = std::find_if(listed.begin(), listed.end(), [&](const ListedGpu& x) { return x.uuid == g.uuid; });
    if (l == listed.end()) continue;
    const auto x = std::find_if(xml.begin(), xml.end(), [&](const XmlGpu& y) { return y.uuid == g.uuid; });
    g.mig_instances.clear();
    for (const auto& m : l->migs) {
      core::MigInstance inst;
      inst.uuid = m.uuid;
      inst.profile = m.profile;
      inst.name = g.name + " MIG " + m.profile;
      inst.index = m.device;
      const XmlMig* d = nullptr;
      if (x != xml.end())
        for (const auto& y : x->migs)
          if (y.index == m.device) d = &y;
      if (d != nullptr && d->gpu_instance_id && d->compute_instance_id) {
        inst.gpu_instance_id = *d->gpu_instance_id;
        inst.compute_instance_id = *d->compute_instance_id;
        inst.memory_total_mib = d->memory_total_mib;
        inst.memory_used_mib = d->memory_used_mib;
        inst.memory_free_mib = d->memory_free_mib;
      } else if (m.gpu_instance_id && m.compute_instance_id) {
        inst.gpu_instance_id = *m.gpu_instance_id;
        inst.compute_instance_id = *m.compute_instance_id;
        for (auto* r : {&inst.memory_total_mib, &inst.memory_used_mib, &inst.memory_free_mib})
          *r = Reading<std::uint64_t>::absent(Absent::Unavailable);
      } else {
        problems.push_back(fmt::format("GPU {}: MIG device {} ({}): nvidia-smi -q -x does not give its instance ids",
                                       g.index, m.device, m.uuid));
        continue;
      }
      g.mig_instances.push_back(std::move(inst));
    }
    if (x == xml.end()) continue;
    for (auto& p : g.processes)
      for (const auto& xp : x->processes)
        if (xp.pid == p.pid && xp.gpu_instance_id) {
          p.gpu_instance_id = xp.gpu_instance_id;
          p.compute_instance_id = xp.compute_instance_id;
        }
  }
  return problems;
}

}  // namespace gf::backends::nvidia_smi
