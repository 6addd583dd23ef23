#pragma once
// The NVML entry points resolved from an opened library, one pointer per GF_NVML_ENTRY_POINTS line.
// A null pointer is a capability the driver lacks. Plain data: copyable, no ownership (the
// DynamicLibrary that the pointers point into must outlive it).
#include <string>

#include "backends/nvml/nvml_abi.hpp"
#include "core/result.hpp"
#include "platform/dynlib.hpp"

namespace gf::backends::nvml {

struct Api {
#define GF_NVML_DECLARE_MEMBER(member, Fn, need, ...) Fn* member = nullptr;
  GF_NVML_ENTRY_POINTS(GF_NVML_DECLARE_MEMBER)
#undef GF_NVML_DECLARE_MEMBER
};

// Resolves every entry point (newest name first). Fails, naming the library and the missing names,
// when a Required entry point has none of its names.
Result<Api> load_api(const platform::DynamicLibrary& lib);

// "GPU is lost (NVML error 15)": nvmlErrorString's text and the code, for messages.
std::string describe(const Api& api, Return code);

}  // namespace gf::backends::nvml
