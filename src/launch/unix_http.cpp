#include "launch/unix_http.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <memory>
#include <system_error>

namespace gf::launch {
namespace {

// Error bodies from the engine are one JSON line; the cap only guards against a misbehaving peer.
constexpr std::size_t kMaxErrorBodyBytes = 64 * 1024;
// How long curl_multi_poll sleeps before we look at the cancel flag again: the cancel latency.
constexpr int kPollIntervalMs = 50;
constexpr long kConnectTimeoutMs = 5000;

// curl_global_init is not thread-safe on every libcurl build; a function-local static runs it once,
// race-free, before the first handle is made. It is never undone: other modules may use curl too.
void ensure_curl_initialised() {
  static const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  (void)rc;  // a failure shows up as curl_easy_init returning null
}

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
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
  ensure_curl_initialised();
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  std::unique_ptr<CURLM, MultiDeleter> multi(curl_multi_init());
  if (!easy || !multi) return TransportError{TransportFailure::Other, "docker: cannot initialise libcurl"};

  Exchange ex;
  ex.request = &request;
  char errbuf[CURL_ERROR_SIZE] = {};
  CURL* h = easy.get();
  curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, socket_path.c_str());
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROXY, "");  // never route the engine's socket through $http_proxy  // no SIGALRM-based DNS timeouts in a threaded program
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  if (request.timeout) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout->count()));
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &ex);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &ex);

  // "Expect:" switches off curl's 100-continue round trip for larger bodies; the engine never needs it.
  curl_slist* raw_headers = curl_slist_append(nullptr, "Expect:");
  if (request.json_body) raw_headers = curl_slist_append(raw_headers, "Content-Type: application/json");
  std::unique_ptr<curl_slist, SlistDeleter> headers(raw_headers);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());

  if (request.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    // An explicit size of 0 makes a body-less POST send "Content-Length: 0", which the engine wants.
    const char* body = request.json_body ? request.json_body->c_str() : "";
    const auto body_size = request.json_body ? request.json_body->size() : 0;
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body_size));
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);  // not copied: `request` outlives the transfer
  } else if (request.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  // The multi interface instead of curl_easy_perform: easy_perform only looks at a progress callback
  // about once a second when the line is idle (as it is during /wait), so cancelling would lag by ~1 s.
  curl_multi_add_handle(multi.get(), h);
  bool cancelled = false;
  int running = 1;
  while (true) {
    if (curl_multi_perform(multi.get(), &running) != CURLM_OK) break;
    if (running == 0) break;
    if (request.cancel != nullptr && request.cancel->load()) {
      cancelled = true;
      break;
    }
    if (curl_multi_poll(multi.get(), nullptr, 0, kPollIntervalMs, nullptr) != CURLM_OK) break;
  }

  CURLcode rc = CURLE_FAILED_INIT;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) rc = msg->data.result;
  }
  long os_errno = 0;
  curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
  curl_multi_remove_handle(multi.get(), h);

  if (cancelled) return TransportError{TransportFailure::Cancelled, "docker: cancelled"};
  if (rc == CURLE_OK) return std::move(ex.response);
  const char* detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  if (rc == CURLE_COULDNT_CONNECT) return connect_error(socket_path, os_errno, detail);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return TransportError{TransportFailure::TimedOut, fmt::format("docker: request timed out: {}", detail)};
  }
  return TransportError{TransportFailure::Other,
                        fmt::format("docker: request to the engine at {} failed: {}", socket_path, detail)};
}

}  // namespace gf::launch
