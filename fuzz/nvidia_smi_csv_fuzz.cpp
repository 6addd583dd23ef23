// libFuzzer target for the nvidia-smi CSV parsers: random bytes must give a value or an error, never
// a crash, an exception, UB or unbounded work. The first byte picks the column list, so the fallback
// lists and a list without a free-text last column are exercised too.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "backends/nvidia_smi/csv.hpp"

namespace {

namespace smi = gf::backends::nvidia_smi;

constexpr smi::Field kNoNameLast[] = {smi::Field::Index, smi::Field::PowerDraw, smi::Field::PState,
                                      smi::Field::ClockEventReasons, smi::Field::PersistenceMode};

std::span<const smi::Field> pick_columns(std::uint8_t selector) {
  switch (selector % 4) {
    case 0: return smi::current_fields();
    case 1: return smi::throttle_fields();
    case 2: return smi::basic_fields();
    default: return kNoNameLast;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto columns = pick_columns(data[0]);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  auto gpus = smi::parse_gpu_lines(text, columns);
  if (gpus) {
    // Touch what was built so a bad object would be noticed by the sanitizers.
    for (const auto& g : gpus->gpus) {
      volatile std::size_t sink = g.uuid.size() + g.name.size() + g.health_message.size();
      (void)sink;
    }
  } else {
    volatile std::size_t sink = gpus.error().message.size();
    (void)sink;
  }
  auto apps = smi::parse_compute_apps(text);
  if (apps) {
    for (const auto& a : *apps) {
      volatile std::size_t sink = a.gpu_uuid.size() + a.process.name.size();
      (void)sink;
    }
  }
  auto rejected = smi::rejected_field(text);
  (void)rejected;
  return 0;
}
