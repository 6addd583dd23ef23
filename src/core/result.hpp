#pragma once
// gf::Result<T>: a value or an error, shaped after std::expected (which GCC 12 lacks).
// Expected failures (a missing library, a GPU that answers an error) travel as Result; exceptions are
// kept for programming errors and caught at module boundaries.
//
// An Error carries a kind besides its sentence, so that a caller can tell "not enough GPUs" from "the
// store failed" without an out-parameter, and the edges turn the kind into an HTTP status
// (server/http.hpp) or an exit code (app/exit_codes.hpp), each in one place.
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gf {

enum class ErrorKind : unsigned char {
  Failed,       // an operation failed: a query, a driver call, I/O, the store (the default)
  Invalid,      // the input is wrong: a request body, a parameter, a task file's contents
  Usage,        // the command line is wrong
  NotFound,     // no such thing: a lease, a job, a GPU, a command to run
  Unavailable,  // not now: fewer GPUs qualify than asked (at once or within the wait)
  NotReady,     // the service cannot answer yet: no reading taken, the store not usable
  Unsupported,  // cannot be done here: a backend this machine lacks, a body type we do not read
  Permission,   // not allowed: the operating system refused (a command that cannot be executed)
};

// "failed", "invalid", "usage", "not_found", "unavailable", "not_ready", "unsupported", "permission".
constexpr std::string_view to_string(ErrorKind k) noexcept {
  switch (k) {
    case ErrorKind::Failed: return "failed";
    case ErrorKind::Invalid: return "invalid";
    case ErrorKind::Usage: return "usage";
    case ErrorKind::NotFound: return "not_found";
    case ErrorKind::Unavailable: return "unavailable";
    case ErrorKind::NotReady: return "not_ready";
    case ErrorKind::Unsupported: return "unsupported";
    case ErrorKind::Permission: return "permission";
  }
  return "failed";
}

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::Failed;
};

// Failed is the default because nearly every error made without a kind is a query, a driver call or
// I/O that went wrong; it maps to what such errors always meant (exit 1, HTTP 500).
inline Error make_error(std::string message) { return Error{std::move(message), ErrorKind::Failed}; }
inline Error make_error(ErrorKind kind, std::string message) { return Error{std::move(message), kind}; }
// The same kind with context in front: "cannot join the queue: " + e.message.
inline Error with_context(std::string_view context, const Error& e) {
  return Error{std::string(context) + e.message, e.kind};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit like expected
  Result(Error e) : v_(std::in_place_index<1>, std::move(e)) {}      // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const& { return std::get<1>(v_); }
  template <class U>
  T value_or(U&& fallback) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT
  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  const Error& error() const& { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace gf
