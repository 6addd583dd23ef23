#include "launch/unix_http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>

#include "platform/dynlib.hpp"

namespace gf::launch {
namespace {

// Error bodies from the engine are one JSON line; the cap only guards against a misbehaving peer.
constexpr std::size_t kMaxErrorBodyBytes = 64 * 1024;
// How long curl_multi_poll sleeps before we look at the cancel flag again: the cancel latency.
constexpr int kPollIntervalMs = 50;
constexpr long kConnectTimeoutMs = 5000;

// libcurl is loaded on first use, not linked: it pulls in some thirty shared libraries (TLS, LDAP,
// Kerberos …) whose loading would triple the start-up time of every gpufleet command, while only
// `run --docker` talks HTTP. The types and constants come from <curl/curl.h>; the functions from
// dlsym on libcurl.so.4 (the soname of Debian's libcurl4).
struct CurlApi {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_multi_init) multi_init;
  decltype(&::curl_multi_cleanup) multi_cleanup;
  decltype(&::curl_multi_add_handle) multi_add_handle;
  decltype(&::curl_multi_remove_handle) multi_remove_handle;
  decltype(&::curl_multi_perform) multi_perform;
  decltype(&::curl_multi_poll) multi_poll;
  decltype(&::curl_multi_info_read) multi_info_read;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
};

struct LoadedCurl {
  std::optional<platform::DynamicLibrary> lib;
  CurlApi api{};
  std::string error;
};

// Loaded once, race-free (function-local static); never unloaded. curl_global_init runs here too:
// it is not thread-safe on every libcurl build.
const LoadedCurl& loaded_curl() {
  static const LoadedCurl curl = [] {
    LoadedCurl c;
    auto lib = platform::DynamicLibrary::open("libcurl.so.4");
    if (!lib) {
      c.error = lib.error().message + " (install the libcurl4 package)";
      return c;
    }
    bool ok = true;
    auto get = [&](auto& fn, const char* name) {
      fn = lib->function<std::remove_reference_t<decltype(fn)>>(name);
      if (!fn) {
        ok = false;
        c.error = std::string("libcurl.so.4 lacks ") + name;
      }
    };
    get(c.api.global_init, "curl_global_init");
    get(c.api.easy_init, "curl_easy_init");
    get(c.api.easy_cleanup, "curl_easy_cleanup");
    get(c.api.easy_setopt, "curl_easy_setopt");
    get(c.api.easy_getinfo, "curl_easy_getinfo");
    get(c.api.easy_strerror, "curl_easy_strerror");
    get(c.api.multi_init, "curl_multi_init");
    get(c.api.multi_cleanup, "curl_multi_cleanup");
    get(c.api.multi_add_handle, "curl_multi_add_handle");
    get(c.api.multi_remove_handle, "curl_multi_remove_handle");
    get(c.api.multi_perform, "curl_multi_perform");
    get(c.api.multi_poll, "curl_multi_poll");
    get(c.api.multi_info_read, "curl_multi_info_read");
    get(c.api.slist_append, "curl_slist_append");
    get(c.api.slist_free_all, "curl_slist_free_all");
    if (ok) {
      (void)c.api.global_init(CURL_GLOBAL_DEFAULT);  // a failure shows up as easy_init returning null
      c.lib = std::move(*lib);
    }
    return c;
  }();
  return curl;
}

const CurlApi& curl() { return loaded_curl().api; }

struct EasyDeleter {
  void operator()(CURL* h) const { curl().easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl().multi_cleanup(m); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl().slist_free_all(l); }
};

struct Exchange {
  const HttpRequest* request = nullptr;
  HttpResponse response;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    // A new status line starts a new header block (after a 100 Continue, say): forget the old one.
    ex->response = HttpResponse{};
    const auto sp = line.find(' ');
    if (sp != std::string_view::npos) ex->response.status = std::strtol(line.data() + sp + 1, nullptr, 10);
    return line.size();
  }
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    const auto name = trim(line.substr(0, colon));
    const auto value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Type")) ex->response.content_type = std::string(value);
    if (iequals(name, "Api-Version")) ex->response.api_version = std::string(value);
  }
  return line.size();
}

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const std::string_view chunk(data, size * count);
  if (ex->response.status < 300 && ex->request->on_body) {
    ex->request->on_body(ex->response.content_type, chunk);
  } else if (ex->response.status >= 300) {
    const auto room = kMaxErrorBodyBytes - std::min(kMaxErrorBodyBytes, ex->response.body.size());
    ex->response.body.append(chunk.substr(0, room));
  } else {
    ex->response.body.append(chunk);
  }
  return chunk.size();
}

TransportError connect_error(const std::string& socket_path, long os_errno, const char* curl_detail) {
  std::string reason = os_errno != 0 ? std::error_code(static_cast<int>(os_errno), std::generic_category()).message()
                                     : std::string(curl_detail);
  std::string hint;
  if (os_errno == ENOENT || os_errno == ECONNREFUSED) {
    hint = " (is the Docker engine running? set DOCKER_HOST=unix:///path/to/docker.sock if it listens elsewhere)";
  } else if (os_errno == EACCES || os_errno == EPERM) {
    hint = " (add your user to the 'docker' group, or run as root)";
  }
  return {TransportFailure::Unreachable,
          fmt::format("cannot reach the Docker engine at {}: {}{}", socket_path, reason, hint)};
}

}  // namespace

std::string url_escape(std::string_view s) {
  // RFC 3986 unreserved characters pass; everything else is %XX. Done by hand so no handle is needed.
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

HttpOutcome perform_unix_http(const std::string& socket_path, const HttpRequest& request) {
  if (!loaded_curl().lib) return TransportError{TransportFailure::Other, "docker: " + loaded_curl().error};
  const CurlApi& api = curl();
  std::unique_ptr<CURL, EasyDeleter> easy(api.easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(api.multi_init());
  if (!easy || !multi) return TransportError{TransportFailure::Other, "docker: cannot initialise libcurl"};

  Exchange ex;
  ex.request = &request;
  char errbuf[CURL_ERROR_SIZE] = {};
  CURL* h = easy.get();
  api.easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, socket_path.c_str());
  api.easy_setopt(h, CURLOPT_URL, request.url.c_str());
  api.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM-based DNS timeouts in a threaded program
  api.easy_setopt(h, CURLOPT_PROXY, "");  // never route the engine's socket through $http_proxy  // no SIGALRM-based DNS timeouts in a threaded program
  api.easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  api.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  if (request.timeout) api.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout->count()));
  api.easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  api.easy_setopt(h, CURLOPT_HEADERDATA, &ex);
  api.easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_write);
  api.easy_setopt(h, CURLOPT_WRITEDATA, &ex);

  // "Expect:" switches off curl's 100-continue round trip for larger bodies; the engine never needs it.
  curl_slist* raw_headers = api.slist_append(nullptr, "Expect:");
  if (request.json_body) raw_headers = api.slist_append(raw_headers, "Content-Type: application/json");
  std::unique_ptr<curl_slist, SlistDeleter> headers(raw_headers);
  api.easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());

  if (request.method == "POST") {
    api.easy_setopt(h, CURLOPT_POST, 1L);
    // An explicit size of 0 makes a body-less POST send "Content-Length: 0", which the engine wants.
    const char* body = request.json_body ? request.json_body->c_str() : "";
    const auto body_size = request.json_body ? request.json_body->size() : 0;
    api.easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body_size));
    api.easy_setopt(h, CURLOPT_POSTFIELDS, body);  // not copied: `request` outlives the transfer
  } else if (request.method != "GET") {
    api.easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  // The multi interface instead of curl_easy_perform: easy_perform only looks at a progress callback
  // about once a second when the line is idle (as it is during /wait), so cancelling would lag by ~1 s.
  api.multi_add_handle(multi.get(), h);
  bool cancelled = false;
  int running = 1;
  while (true) {
    if (api.multi_perform(multi.get(), &running) != CURLM_OK) break;
    if (running == 0) break;
    if (request.cancel != nullptr && request.cancel->load()) {
      cancelled = true;
      break;
    }
    if (api.multi_poll(multi.get(), nullptr, 0, kPollIntervalMs, nullptr) != CURLM_OK) break;
  }

  CURLcode rc = CURLE_FAILED_INIT;
  int left = 0;
  while (CURLMsg* msg = api.multi_info_read(multi.get(), &left)) {
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) rc = msg->data.result;
  }
  long os_errno = 0;
  api.easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
  api.multi_remove_handle(multi.get(), h);

  if (cancelled) return TransportError{TransportFailure::Cancelled, "docker: cancelled"};
  if (rc == CURLE_OK) return std::move(ex.response);
  const char* detail = errbuf[0] != '\0' ? errbuf : api.easy_strerror(rc);
  if (rc == CURLE_COULDNT_CONNECT) return connect_error(socket_path, os_errno, detail);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return TransportError{TransportFailure::TimedOut, fmt::format("docker: request timed out: {}", detail)};
  }
  return TransportError{TransportFailure::Other,
                        fmt::format("docker: request to the engine at {} failed: {}", socket_path, detail)};
}

}  // namespace gf::launch
