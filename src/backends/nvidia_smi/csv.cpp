#include "backends/nvidia_smi/csv.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "core/text.hpp"
#include "platform/log.hpp"

namespace gf::backends::nvidia_smi {
namespace {

using core::Absent;
using core::GpuReading;
using core::Reading;

constexpr std::array<std::pair<Field, std::string_view>, 28> kFieldNames{{
    {Field::Index, "index"},
    {Field::Uuid, "uuid"},
    {Field::PciBusId, "pci.bus_id"},
    {Field::MemoryTotal, "memory.total"},
    {Field::MemoryUsed, "memory.used"},
    {Field::MemoryFree, "memory.free"},
    {Field::UtilizationGpu, "utilization.gpu"},
    {Field::UtilizationMemory, "utilization.memory"},
    {Field::TemperatureGpu, "temperature.gpu"},
    {Field::PowerDraw, "power.draw"},
    {Field::PowerLimit, "power.limit"},
    {Field::FanSpeed, "fan.speed"},
    {Field::ClocksGraphics, "clocks.gr"},
    {Field::ClocksMemory, "clocks.mem"},
    {Field::PState, "pstate"},
    {Field::ClockEventReasons, "clocks_event_reasons.active"},
    {Field::ClockThrottleReasons, "clocks_throttle_reasons.active"},
    {Field::MigModeCurrent, "mig.mode.current"},
    {Field::EccUncorrectedVolatileTotal, "ecc.errors.uncorrected.volatile.total"},
    {Field::PersistenceMode, "persistence_mode"},
    {Field::EccCorrectedVolatileTotal, "ecc.errors.corrected.volatile.total"},
    {Field::EccCorrectedAggregateTotal, "ecc.errors.corrected.aggregate.total"},
    {Field::EccUncorrectedAggregateTotal, "ecc.errors.uncorrected.aggregate.total"},
    {Field::RetiredPagesSbe, "retired_pages.sbe"},
    {Field::RetiredPagesDbe, "retired_pages.dbe"},
    {Field::RetiredPagesPending, "retired_pages.pending"},
    {Field::DriverVersion, "driver_version"},
    {Field::Name, "name"},
}};

constexpr std::array kCurrentFields{
    Field::Index,
    Field::Uuid,
    Field::PciBusId,
    Field::MemoryTotal,
    Field::MemoryUsed,
    Field::MemoryFree,
    Field::UtilizationGpu,
    Field::UtilizationMemory,
    Field::TemperatureGpu,
    Field::PowerDraw,
    Field::PowerLimit,
    Field::FanSpeed,
    Field::ClocksGraphics,
    Field::ClocksMemory,
    Field::PState,
    Field::ClockEventReasons,
    Field::MigModeCurrent,
    Field::EccUncorrectedVolatileTotal,
    Field::PersistenceMode,
    Field::EccCorrectedVolatileTotal,
    Field::EccCorrectedAggregateTotal,
    Field::EccUncorrectedAggregateTotal,
    Field::RetiredPagesSbe,
    Field::RetiredPagesDbe,
    Field::RetiredPagesPending,
    Field::DriverVersion,
    Field::Name,
};

// Same columns in the same order; only the reasons field has its pre-535 name.
constexpr auto kThrottleFields = [] {
  auto fields = kCurrentFields;
  for (Field& f : fields)
    if (f == Field::ClockEventReasons) f = Field::ClockThrottleReasons;
  return fields;
}();

// Fields every nvidia-smi since the R3xx drivers knows.
constexpr std::array kBasicFields{
    Field::Index,          Field::Uuid,         Field::PciBusId,       Field::MemoryTotal,
    Field::MemoryUsed,     Field::MemoryFree,   Field::UtilizationGpu, Field::UtilizationMemory,
    Field::TemperatureGpu, Field::PowerDraw,    Field::PowerLimit,     Field::FanSpeed,
    Field::ClocksGraphics, Field::ClocksMemory, Field::PState,         Field::PersistenceMode,
    Field::DriverVersion,  Field::Name,
};

using core::trim;

// A short, printable excerpt of untrusted text for an error message.
std::string excerpt(std::string_view s) { return platform::printable(s, 32); }  // escaped, at most 4x as long

// Text fields end up in JSON, tables and logs; control characters have no business there.
std::string printable(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

// Calls f(line, line_number) for every line; '\r' before '\n' is dropped by trim().
template <class F>
Result<void> for_each_line(std::string_view text, F&& f) {
  std::size_t number = 0;
  while (!text.empty()) {
    ++number;
    const std::size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (auto r = f(trim(line), number); !r) return r;
  }
  return {};
}

// Splits `line` into exactly `count` comma-separated fields (trimmed). When `rest_is_text`, the last
// field is everything after the (count-1)th comma, commas included. False when the count is wrong;
// `found` is then how many fields there were (count + 1 meaning "more").
bool split_fields(std::string_view line, std::size_t count, bool rest_is_text, std::vector<std::string_view>& out,
                  std::size_t& found) {
  out.clear();
  found = 0;
  if (count == 0) return false;
  while (true) {
    if (rest_is_text && out.size() + 1 == count) {
      out.push_back(trim(line));
      break;
    }
    const std::size_t comma = line.find(',');
    out.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    line.remove_prefix(comma + 1);
    if (out.size() > count) break;  // bounded: no need to count every comma of a garbage line
  }
  found = out.size();
  return out.size() == count;
}

// How nvidia-smi fills a field that has no value.
enum class Token : unsigned char {
  Value,
  NotAvailable,
  NotSupported,
  NoPermission,
  ResetRequired,
  UnknownError,
  Lost,
  OtherBracketed,
};

Token classify(std::string_view t) noexcept {
  if (t == "[N/A]" || t == "N/A") return Token::NotAvailable;
  if (t == "[Not Supported]") return Token::NotSupported;
  if (t == "[Insufficient Permissions]") return Token::NoPermission;
  if (t == "[GPU requires reset]") return Token::ResetRequired;
  if (t == "[Unknown Error]") return Token::UnknownError;
  if (t == "[GPU is lost]") return Token::Lost;
  // Newer drivers print other bracketed notes (e.g. "[Requested functionality has been deprecated]").
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') return Token::OtherBracketed;
  return Token::Value;
}

Absent absent_reason(Token t) noexcept {
  switch (t) {
    case Token::NotAvailable: return Absent::Unavailable;
    case Token::NotSupported: return Absent::NotSupported;
    case Token::NoPermission: return Absent::NoPermission;
    case Token::Lost: return Absent::GpuLost;  // "[GPU requires reset]" stays an error, as its health says
    default: return Absent::Error;
  }
}

template <class T>
bool parse_integer(std::string_view s, T& out, int base = 10) noexcept {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, out, base);
  return ec == std::errc{} && ptr == end;
}

bool parse_number(std::string_view s, double& out) noexcept {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, out, std::chars_format::fixed);
  return ec == std::errc{} && ptr == end && std::isfinite(out);
}

// "0x0000000000000004" → 4.
bool parse_mask(std::string_view s, std::uint64_t& out) noexcept {
  if (s.size() < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  s.remove_prefix(2);
  return s.size() <= 16 && parse_integer(s, out, 16);
}

// "Enabled" → true, "Disabled" → false, anything else → nullopt.
std::optional<bool> parse_enabled(std::string_view s) noexcept {
  if (s == "Enabled") return true;
  if (s == "Disabled") return false;
  return std::nullopt;
}

// What a line said about the GPU's state, collected while its fields are read.
struct Trouble {
  bool lost = false;
  bool reset = false;
  bool unknown_error = false;

  void note(Token t) noexcept {
    lost |= t == Token::Lost;
    reset |= t == Token::ResetRequired;
    unknown_error |= t == Token::UnknownError;
  }
  void apply(GpuReading& g) const {
    if (lost) {
      g.health = core::Health::Lost;
      g.health_message = "GPU is lost (nvidia-smi reports [GPU is lost])";
    } else if (reset) {
      g.health = core::Health::Error;
      g.health_message = "GPU requires reset (nvidia-smi reports [GPU requires reset])";
    } else if (unknown_error) {
      g.health = core::Health::Error;
      g.health_message = "nvidia-smi reports [Unknown Error] for this GPU";
    }
  }
};

// Reads one line of --query-gpu output into a GpuReading.
class GpuLineReader {
 public:
  GpuLineReader(std::size_t line_number, std::size_t ordinal) : line_(line_number), ordinal_(ordinal) {}

  Result<void> read(Field f, std::string_view tok) {
    const Token t = classify(tok);
    trouble_.note(t);
    switch (f) {
      case Field::Index:
        if (t != Token::Value) return {};  // filled from the line's position in finish()
        if (unsigned v = 0; parse_integer(tok, v)) {
          index_ = v;
          return {};
        }
        return bad(f, tok, "a GPU index");
      case Field::Uuid: return text(t, tok, gpu_.uuid);
      case Field::PciBusId: return text(t, tok, gpu_.pci_bus_id);
      case Field::Name: return text(t, tok, gpu_.name);
      case Field::DriverVersion: return text(t, tok, driver_version_);
      case Field::MemoryTotal: return integer(f, t, tok, gpu_.memory_total_mib);
      case Field::MemoryUsed: return integer(f, t, tok, gpu_.memory_used_mib);
      case Field::MemoryFree: return integer(f, t, tok, gpu_.memory_free_mib);
      case Field::UtilizationGpu: return integer(f, t, tok, gpu_.utilization_pct);
      case Field::UtilizationMemory: return integer(f, t, tok, gpu_.memory_utilization_pct);
      case Field::TemperatureGpu: return integer(f, t, tok, gpu_.temperature_c);
      case Field::FanSpeed: return integer(f, t, tok, gpu_.fan_pct);
      case Field::ClocksGraphics: return integer(f, t, tok, gpu_.clock_graphics_mhz);
      case Field::ClocksMemory: return integer(f, t, tok, gpu_.clock_memory_mhz);
      case Field::EccUncorrectedVolatileTotal: return integer(f, t, tok, gpu_.ecc_uncorrected_volatile);
      case Field::EccCorrectedVolatileTotal: return integer(f, t, tok, gpu_.ecc_corrected_volatile);
      case Field::EccCorrectedAggregateTotal: return integer(f, t, tok, gpu_.ecc_corrected_aggregate);
      case Field::EccUncorrectedAggregateTotal: return integer(f, t, tok, gpu_.ecc_uncorrected_aggregate);
      case Field::RetiredPagesSbe: return integer(f, t, tok, gpu_.retired_pages_sbe);
      case Field::RetiredPagesDbe: return integer(f, t, tok, gpu_.retired_pages_dbe);
      case Field::RetiredPagesPending: return yes_no(f, t, tok, gpu_.retired_pages_pending);
      case Field::PowerDraw: return power(f, t, tok, gpu_.power_draw_w);
      case Field::PowerLimit: return power(f, t, tok, gpu_.power_limit_w);
      case Field::PState: return pstate(f, t, tok);
      case Field::ClockEventReasons:
      case Field::ClockThrottleReasons: {
        if (t != Token::Value) return absent(t, gpu_.clock_event_reasons);
        std::uint64_t mask = 0;
        if (!parse_mask(tok, mask)) return bad(f, tok, "a hex mask like 0x0000000000000004");
        gpu_.clock_event_reasons = mask;
        return {};
      }
      case Field::MigModeCurrent: return enabled(f, t, tok, gpu_.mig_enabled);
      case Field::PersistenceMode: return enabled(f, t, tok, gpu_.persistence_mode);
    }
    return {};
  }

  GpuReading finish() && {
    gpu_.index = index_ ? *index_ : static_cast<unsigned>(ordinal_);
    trouble_.apply(gpu_);
    return std::move(gpu_);
  }
  const std::string& driver_version() const noexcept { return driver_version_; }

 private:
  Error bad(Field f, std::string_view tok, std::string_view expected) const {
    return make_error(fmt::format("line {}: {}: expected {}, got '{}'", line_, field_name(f), expected, excerpt(tok)));
  }

  template <class T>
  static Result<void> absent(Token t, Reading<T>& r) {
    r = Reading<T>::absent(absent_reason(t));
    return {};
  }

  static Result<void> text(Token t, std::string_view tok, std::string& out) {
    if (t == Token::Value) out = printable(tok);  // a bracketed note is no uuid or name: leave empty
    return {};
  }

  template <class T>
  Result<void> integer(Field f, Token t, std::string_view tok, Reading<T>& r) const {
    if (t != Token::Value) return absent(t, r);
    T v{};
    if (!parse_integer(tok, v)) return bad(f, tok, "an integer");
    r = v;
    return {};
  }

  Result<void> power(Field f, Token t, std::string_view tok, Reading<double>& r) const {
    if (t != Token::Value) return absent(t, r);
    double v = 0;
    if (!parse_number(tok, v) || v < 0) return bad(f, tok, "watts like 123.45");
    r = v;
    return {};
  }

  Result<void> pstate(Field f, Token t, std::string_view tok) {
    if (t != Token::Value) return absent(t, gpu_.performance_state);
    unsigned p = 0;
    if (tok.size() < 2 || tok[0] != 'P' || !parse_integer(tok.substr(1), p))
      return bad(f, tok, "a performance state P0..P15");
    // NVML's "unknown" state is 32; anything past P15 carries no meaning.
    gpu_.performance_state = p <= 15 ? Reading<unsigned>(p) : Reading<unsigned>::absent(Absent::Unavailable);
    return {};
  }

  Result<void> enabled(Field f, Token t, std::string_view tok, Reading<bool>& r) const {
    if (t != Token::Value) return absent(t, r);
    const auto v = parse_enabled(tok);
    if (!v) return bad(f, tok, "Enabled or Disabled");
    r = *v;
    return {};
  }

  // retired_pages.pending prints "Yes" or "No".
  Result<void> yes_no(Field f, Token t, std::string_view tok, Reading<bool>& r) const {
    if (t != Token::Value) return absent(t, r);
    if (tok == "Yes") {
      r = true;
    } else if (tok == "No") {
      r = false;
    } else {
      return bad(f, tok, "Yes or No");
    }
    return {};
  }

  std::size_t line_;
  std::size_t ordinal_;
  GpuReading gpu_;
  std::optional<unsigned> index_;
  std::string driver_version_;
  Trouble trouble_;
};

std::string basename_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string_view::npos || slash + 1 == path.size()) return printable(path);
  return printable(path.substr(slash + 1));
}

}  // namespace

std::string_view field_name(Field f) noexcept {
  for (const auto& [field, name] : kFieldNames)
    if (field == f) return name;
  return "?";
}

std::optional<Field> field_from_name(std::string_view name) noexcept {
  for (const auto& [field, n] : kFieldNames)
    if (n == name) return field;
  return std::nullopt;
}

std::span<const Field> current_fields() noexcept { return kCurrentFields; }
std::span<const Field> throttle_fields() noexcept { return kThrottleFields; }
std::span<const Field> basic_fields() noexcept { return kBasicFields; }

std::string join_fields(std::span<const Field> columns) {
  std::string out;
  for (const Field f : columns) {
    if (!out.empty()) out += ',';
    out += field_name(f);
  }
  return out;
}

Result<GpuTable> parse_gpu_lines(std::string_view text, std::span<const Field> columns) {
  if (columns.empty()) return make_error("no columns to parse");
  const bool name_last = columns.back() == Field::Name;
  GpuTable table;
  std::vector<std::string_view> fields;
  fields.reserve(columns.size() + 1);
  auto r = for_each_line(text, [&](std::string_view line, std::size_t number) -> Result<void> {
    // nvidia-smi prints this (with exit 0 on some versions) when the driver sees no GPU.
    if (line.empty() || line == "No devices were found") return {};
    std::size_t found = 0;
    if (!split_fields(line, columns.size(), name_last, fields, found)) {
      const std::string got =
          found > columns.size() ? fmt::format("more than {}", columns.size()) : std::to_string(found);
      return make_error(fmt::format("line {}: expected {} comma-separated fields, found {}: '{}'", number,
                                    columns.size(), got, excerpt(line)));
    }
    GpuLineReader reader(number, table.gpus.size());
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (auto ok = reader.read(columns[i], fields[i]); !ok) return ok;
    }
    if (table.driver_version.empty()) table.driver_version = reader.driver_version();
    table.gpus.push_back(std::move(reader).finish());
    return {};
  });
  if (!r) return r.error();
  return table;
}

Result<std::vector<ComputeApp>> parse_compute_apps(std::string_view text) {
  constexpr std::size_t kColumns = 4;  // gpu_uuid, pid, used_memory, process_name
  std::vector<ComputeApp> apps;
  std::vector<std::string_view> fields;
  fields.reserve(kColumns + 1);
  auto r = for_each_line(text, [&](std::string_view line, std::size_t number) -> Result<void> {
    if (line.empty() || line == "No running processes found") return {};
    std::size_t found = 0;
    if (!split_fields(line, kColumns, true, fields, found)) {
      return make_error(fmt::format("line {}: expected {} comma-separated fields, found {}: '{}'", number, kColumns,
                                    found, excerpt(line)));
    }
    const std::string_view uuid = fields[0], pid = fields[1], mem = fields[2], name = fields[3];
    // A row without a GPU or a pid cannot be attributed to anything; nvidia-smi prints such rows for
    // processes it cannot see into (e.g. from another container).
    if (classify(uuid) != Token::Value || classify(pid) != Token::Value) return {};
    ComputeApp app;
    app.gpu_uuid = printable(uuid);
    if (!parse_integer(pid, app.process.pid))
      return make_error(fmt::format("line {}: pid: expected an integer, got '{}'", number, excerpt(pid)));
    if (classify(mem) == Token::Value) {
      std::uint64_t mib = 0;
      if (!parse_integer(mem, mib))
        return make_error(fmt::format("line {}: used_memory: expected an integer, got '{}'", number, excerpt(mem)));
      app.process.used_memory_mib = mib;
    }
    app.process.kind = core::ProcessKind::Compute;
    if (classify(name) == Token::Value) app.process.name = basename_of(name);
    apps.push_back(std::move(app));
    return {};
  });
  if (!r) return r.error();
  return apps;
}

std::optional<std::string> rejected_field(std::string_view text) {
  constexpr std::string_view kMarker = "is not a valid field to query";
  const std::size_t at = text.find(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  // The message reads: Field "clocks_event_reasons.active" is not a valid field to query.
  const std::string_view before = text.substr(0, at);
  const std::size_t close = before.rfind('"');
  if (close == std::string_view::npos || close == 0) return std::string();
  const std::size_t open = before.rfind('"', close - 1);
  if (open == std::string_view::npos) return std::string();
  return printable(before.substr(open + 1, close - open - 1));
}

}  // namespace gf::backends::nvidia_smi
