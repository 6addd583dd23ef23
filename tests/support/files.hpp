#pragma once
// Whole files in and out, for tests: what a program wrote, and the inputs (configs, scripts) a test gives
// it. A file that cannot be written throws: the test fails there, not later on a missing file.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gf::test {

// The file's bytes; empty when it cannot be read.
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Writes `text` to p (replacing it; parent directories made) and returns p as a string.
inline std::string write_file(const std::filesystem::path& p, std::string_view text) {
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + p.string());
  return p.string();
}

}  // namespace gf::test
