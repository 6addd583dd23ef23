#pragma once
// Reading<T>: a measured value, or the reason there is none. A device that does not report a value
// yields an absent Reading (JSON null, "n/a" in tables) — never a made-up zero.
#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

namespace gf::core {

// Every reason a reading can be missing, one row each: X(enumerator, code, words). The enum, code(),
// to_string() and kAbsentReasons are all generated from this list, so a new reason is one row here
// and every document that lists the reasons (GET /api/v1/fields, the status legend) shows it.
// code: for documents, stable (clients match on it); words: for people.
#define GF_ABSENT_REASONS(X)                                                                                         \
  X(NotQueried, "not_queried", "not queried")            /* nobody asked (the backend has no such field) */          \
  X(NotSupported, "not_supported", "not supported")      /* the device says it has no such value */                  \
  X(NoPermission, "no_permission", "no permission")      /* the value exists but we may not read it */               \
  X(Unavailable, "unavailable", "unavailable")           /* the driver cannot tell now (NVML_VALUE_NOT_AVAILABLE) */ \
  X(Error, "error", "error")                             /* the query failed */                                      \
  X(GpuLost, "gpu_lost", "GPU lost")                     /* fell off the bus (NVML GPU_IS_LOST, "[GPU is lost]") */  \
  X(MigEnabled, "mig_enabled", "not reported under MIG") /* not reported in MIG mode (ask the instances) */

enum class Absent : unsigned char {
#define GF_ABSENT_ENUMERATOR(name, code, words) name,
  GF_ABSENT_REASONS(GF_ABSENT_ENUMERATOR)
#undef GF_ABSENT_ENUMERATOR
};

struct AbsentReason {
  Absent reason;
  std::string_view code;   // "not_supported", "no_permission", "gpu_lost", …
  std::string_view words;  // "not supported", "no permission", "GPU lost", …
};

// Every reason, in the enum's order (kAbsentReasons[i].reason == Absent(i)).
inline constexpr AbsentReason kAbsentReasons[] = {
#define GF_ABSENT_ROW(name, code, words) {Absent::name, code, words},
    GF_ABSENT_REASONS(GF_ABSENT_ROW)
#undef GF_ABSENT_ROW
};
inline constexpr std::size_t kAbsentReasonCount = std::size(kAbsentReasons);

// For people: "not supported", "no permission", "GPU lost", …
constexpr std::string_view to_string(Absent a) noexcept {
  const auto i = static_cast<std::size_t>(a);
  return i < kAbsentReasonCount ? kAbsentReasons[i].words : std::string_view("unknown");
}
// For documents: "not_supported", "no_permission", "gpu_lost", … (stable; clients match on it).
constexpr std::string_view code(Absent a) noexcept {
  const auto i = static_cast<std::size_t>(a);
  return i < kAbsentReasonCount ? kAbsentReasons[i].code : std::string_view("error");
}

template <class T>
class Reading {
 public:
  Reading() = default;
  Reading(T v) : value_(std::move(v)) {}  // NOLINT: implicit, a value is a reading
  static Reading absent(Absent why) {
    Reading r;
    r.why_ = why;
    return r;
  }

  bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  const T& value() const { return *value_; }
  const T& operator*() const { return *value_; }
  T value_or(T fallback) const { return value_.value_or(std::move(fallback)); }
  Absent why() const noexcept { return why_; }
  const std::optional<T>& optional() const noexcept { return value_; }

  friend bool operator==(const Reading& a, const Reading& b) {
    return a.value_ == b.value_ && (a.value_ || a.why_ == b.why_);
  }

 private:
  std::optional<T> value_;
  Absent why_ = Absent::NotQueried;
};

}  // namespace gf::core
