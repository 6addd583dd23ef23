#pragma once
// A shared library opened with dlopen(RTLD_NOW | RTLD_LOCAL), closed on destruction. Move-only;
// symbol() is thread-safe.
#include <string>

#include "core/result.hpp"

namespace gf::platform {

class DynamicLibrary {
 public:
  static Result<DynamicLibrary> open(const std::string& path);
  DynamicLibrary(DynamicLibrary&& o) noexcept : handle_(o.handle_), path_(std::move(o.path_)) { o.handle_ = nullptr; }
  DynamicLibrary& operator=(DynamicLibrary&& o) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  // The address of a symbol, or nullptr when the library lacks it.
  void* symbol(const char* name) const noexcept;
  template <class Fn>
  Fn function(const char* name) const noexcept {
    return reinterpret_cast<Fn>(symbol(name));
  }
  const std::string& path() const noexcept { return path_; }

 private:
  DynamicLibrary(void* h, std::string path) : handle_(h), path_(std::move(path)) {}
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace gf::platform
