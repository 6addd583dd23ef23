#pragma once
// A fresh directory for one test: made with mkdtemp (mode 0755) under the temp directory, named after the running
// gtest test (so a directory left by a crash says whose it was), removed with everything in it when the
// TempDir goes. Each TempDir is its own, even for two in one test or the same test run twice at once.
//
//   gf::test::TempDir dir;
//   const auto db = dir / "gf.db";
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <stdexcept>
#include <string>

namespace gf::test {

class TempDir {
 public:
  // parent: where to make it (the temp directory unless a test needs a place others can reach).
  explicit TempDir(const std::filesystem::path& parent = std::filesystem::temp_directory_path()) {
    std::string tmpl = (parent / ("gf-" + test_name() + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
    path_ = tmpl;
    // 0755, as a directory made with the usual umask: tests run checks as other users (test_users.hpp,
    // unprivileged.hpp) that must reach into it; a test that needs it private or shared sets its mode.
    std::filesystem::permissions(path_, std::filesystem::perms(0755));
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }

 private:
  // "Suite.Name" of the running test in characters safe in a file name (parameterized names hold '/'),
  // cut short: unix socket paths made inside the directory must stay under 108 bytes.
  static std::string test_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
    for (auto& c : name) {
      const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '-';
      if (!safe) c = '_';
    }
    constexpr std::size_t kMax = 48;
    if (name.size() > kMax) name.erase(0, name.size() - kMax);  // the test's own name is at the end
    return name;
  }

  std::filesystem::path path_;
};

}  // namespace gf::test
