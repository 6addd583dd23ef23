#pragma once
// Shared set-up for the NVML tests: opens the fake library for its test hooks, writes per-test
// scenario files, and opens the backend exactly as production does (BackendOptions::nvml_library).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backends/nvml/nvml_backend.hpp"
#include "core/ports/clock.hpp"
#include "platform/dynlib.hpp"
#include "support/temp_dir.hpp"

#include "gf_test_paths.hpp"

namespace gf::backends::nvml_test {

// A clock that says the same time until a test moves it on, so snapshots' timestamps can be checked
// and paced reads (the slow fields' kSlowReadInterval) come due when the test says.
class FixedClock final : public core::Clock {
 public:
  std::chrono::steady_clock::time_point now() const override {
    return std::chrono::steady_clock::time_point{std::chrono::nanoseconds{elapsed_ns_.load()}};
  }
  std::chrono::system_clock::time_point wall_now() const override {
    return std::chrono::system_clock::time_point{std::chrono::seconds{1'700'000'000}} +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(
               std::chrono::nanoseconds{elapsed_ns_.load()});
  }
  void advance(std::chrono::nanoseconds d) { elapsed_ns_ += d.count(); }

 private:
  std::atomic<long long> elapsed_ns_{0};
};

// The test's own handle on a fake library. Holding it keeps the library loaded for the whole test,
// so the backend (which opens the same path) and the test see the same counters.
class FakeNvmlHooks {
 public:
  explicit FakeNvmlHooks(platform::DynamicLibrary lib) : lib_(std::move(lib)) {
    calls_ = lib_.function<unsigned long long (*)()>("fake_nvml_call_count");
    calls_of_ = lib_.function<unsigned long long (*)(const char*)>("fake_nvml_call_count_of");
    reset_ = lib_.function<void (*)()>("fake_nvml_reset");
    refcount_ = lib_.function<int (*)()>("fake_nvml_init_refcount");
  }
  bool complete() const { return calls_ && calls_of_ && reset_ && refcount_; }
  unsigned long long calls() const { return calls_(); }
  unsigned long long calls_of(const char* function) const { return calls_of_(function); }
  void reset() const { reset_(); }
  int init_refcount() const { return refcount_(); }
  const platform::DynamicLibrary& library() const { return lib_; }

 private:
  platform::DynamicLibrary lib_;
  unsigned long long (*calls_)() = nullptr;
  unsigned long long (*calls_of_)(const char*) = nullptr;
  void (*reset_)() = nullptr;
  int (*refcount_)() = nullptr;
};

class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* path : {GF_FAKE_NVML, GF_FAKE_NVML_OLD}) {
      auto lib = platform::DynamicLibrary::open(path);
      ASSERT_TRUE(lib) << lib.error().message;
      auto& slot = std::string(path) == GF_FAKE_NVML ? fake_ : fake_old_;
      slot.emplace(std::move(*lib));
      ASSERT_TRUE(slot->complete()) << path << " lacks a test hook";
      slot->reset();
      // Every earlier test closed what it opened.
      ASSERT_EQ(slot->init_refcount(), 0) << path;
    }
  }

  static std::string fixture(const char* name) { return std::string(GF_FIXTURES_DIR) + "/nvml/" + name; }

  // Writes a scenario into this test's temp dir and returns its path.
  std::string write_scenario(const nlohmann::json& scenario, const char* name = "scenario.json") const {
    const auto path = dir_ / name;
    std::ofstream(path) << scenario.dump(2);
    return path.string();
  }

  // Opens the backend on `library` with FAKE_NVML_SCENARIO set, as the real one is opened.
  // xid_events: start the XID event thread, as the agent does (off, as one-shot commands have it).
  Result<std::unique_ptr<Backend>> open(const std::string& scenario_path, const char* library = GF_FAKE_NVML,
                                        bool xid_events = false) {
    ::setenv("FAKE_NVML_SCENARIO", scenario_path.c_str(), 1);
    BackendOptions opts;
    opts.nvml_library = library;
    opts.xid_events = xid_events;
    opts.clock = &clock_;
    return open_nvml(opts);
  }

  const FakeNvmlHooks& fake() const { return *fake_; }
  const FakeNvmlHooks& fake_old() const { return *fake_old_; }

  FixedClock clock_;
  test::TempDir tmp_;
  const std::filesystem::path dir_ = tmp_.path();

 private:
  std::optional<FakeNvmlHooks> fake_;
  std::optional<FakeNvmlHooks> fake_old_;
};

}  // namespace gf::backends::nvml_test
