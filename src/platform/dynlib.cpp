#include "platform/dynlib.hpp"

#include <dlfcn.h>

namespace gf::platform {

Result<DynamicLibrary> DynamicLibrary::open(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return make_error(std::string("cannot load ") + path + ": " + (why ? why : "unknown dlopen error"));
  }
  return DynamicLibrary(h, path);
}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& o) noexcept {
  if (this != &o) {
    if (handle_) dlclose(handle_);
    handle_ = o.handle_;
    path_ = std::move(o.path_);
    o.handle_ = nullptr;
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_) dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const noexcept { return handle_ ? dlsym(handle_, name) : nullptr; }

}  // namespace gf::platform
