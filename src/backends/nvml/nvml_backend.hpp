#pragma once
#include <memory>

#include "backends/backend.hpp"

namespace gf::backends {

// Opens the nvml backend, or says why it cannot be used here.
//
// dlopens opts.nvml_library (default libnvidia-ml.so.1), resolves NVML's entry points newest name
// first, and calls nvmlInit once; the backend's destructor calls the matching nvmlShutdown and then
// closes the library. Fails with a one-line message naming the library when it cannot be loaded,
// lacks required symbols, or nvmlInit fails (a driver/kernel-module version mismatch says how to fix
// it). snapshot() reads every GPU (a lost or failing GPU is reported in its health, the others as
// usual), asks each device only for what it has not already called NOT_SUPPORTED, and leaves process
// names, users and commands for the caller. topology() gives every pair's PCIe common ancestor and the
// active NvLink links between GPUs; whatever the driver or a device cannot tell stays Unknown (not an
// error). On GPUs with NVML GPM (Hopper and later) snapshot() also fills the profiling readings, with a
// GPM sample every opts.gpm_interval (nvml_gpm.hpp); elsewhere they are absent and profiling_note says
// why. Not thread-safe: one caller at a time.
Result<std::unique_ptr<Backend>> open_nvml(const BackendOptions& opts);

}  // namespace gf::backends
