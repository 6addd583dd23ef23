#pragma once
// Reading<T>: a measured value, or the reason there is none. A device that does not report a value
// yields an absent Reading (JSON null, "n/a" in tables) — never a made-up zero.
#include <optional>
#include <string_view>
#include <utility>

namespace gf::core {

enum class Absent : unsigned char {
  NotQueried,    // nobody asked (the backend has no such field)
  NotSupported,  // the device says it has no such value
  NoPermission,  // the value exists but we may not read it
  Unavailable,   // the driver cannot tell right now (e.g. NVML_VALUE_NOT_AVAILABLE)
  Error,         // the query failed
  GpuLost,       // the GPU fell off the bus (NVML GPU_IS_LOST, nvidia-smi "[GPU is lost]")
  MigEnabled,    // the device does not report it while MIG mode is on (ask the MIG instances)
};

// For people: "not supported", "no permission", "GPU lost", …
std::string_view to_string(Absent a) noexcept;
// For documents: "not_supported", "no_permission", "gpu_lost", … (stable; clients match on it).
std::string_view code(Absent a) noexcept;

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
