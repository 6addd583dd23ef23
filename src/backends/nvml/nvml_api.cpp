#include "backends/nvml/nvml_api.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <vector>

namespace gf::backends::nvml {
namespace {

enum class Need { Required, Optional };

// The first of `names` the library exports, or false when it exports none.
template <class Fn>
bool resolve(const platform::DynamicLibrary& lib, Fn*& out, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto* fn = lib.function<Fn*>(name)) {
      out = fn;
      return true;
    }
  }
  return false;
}

std::string alternatives(std::initializer_list<const char*> names) { return fmt::format("{}", fmt::join(names, "|")); }

}  // namespace

Result<Api> load_api(const platform::DynamicLibrary& lib) {
  Api api;
  std::vector<std::string> missing;
#define GF_NVML_RESOLVE(member, Fn, need, ...)                                  \
  if (!resolve(lib, api.member, {__VA_ARGS__}) && Need::need == Need::Required) \
    missing.push_back(alternatives({__VA_ARGS__}));
  GF_NVML_ENTRY_POINTS(GF_NVML_RESOLVE)
#undef GF_NVML_RESOLVE
  if (!missing.empty())
    return make_error(
        fmt::format("nvml: {} is not a usable NVML library: it lacks {}", lib.path(), fmt::join(missing, ", ")));
  return api;
}

std::string describe(const Api& api, Return code) {
  const char* text = api.error_string ? api.error_string(code) : nullptr;
  return fmt::format("{} (NVML error {})", text && *text ? text : "unknown error", code);
}

}  // namespace gf::backends::nvml
