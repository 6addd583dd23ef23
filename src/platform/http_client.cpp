#include "platform/http_client.hpp"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <type_traits>

#include "core/text.hpp"
#include "platform/dynlib.hpp"
#include "platform/url.hpp"

namespace gf::platform {
namespace {

constexpr std::size_t kMaxErrorBodyBytes = 64 * 1024;
// How long curl_multi_poll sleeps before we look at the cancel flag again: the cancel latency.
constexpr int kPollIntervalMs = 50;

// libcurl is loaded on first use, not linked: it pulls in some thirty shared libraries (TLS, LDAP,
// Kerberos …) whose loading would triple the start-up time of every gpufleet command, while only a few
// verbs talk HTTP. The types and constants come from <curl/curl.h>; the functions from dlsym on
// libcurl.so.4 (the soname of Debian's libcurl4).
// The functions used, each named once (as NVML's GF_NVML_ENTRY_POINTS): CURL_FN(member, symbol).
#define GF_CURL_ENTRY_POINTS(CURL_FN)                    \
  CURL_FN(global_init, curl_global_init)                 \
  CURL_FN(easy_init, curl_easy_init)                     \
  CURL_FN(easy_cleanup, curl_easy_cleanup)               \
  CURL_FN(easy_setopt, curl_easy_setopt)                 \
  CURL_FN(easy_getinfo, curl_easy_getinfo)               \
  CURL_FN(easy_strerror, curl_easy_strerror)             \
  CURL_FN(multi_init, curl_multi_init)                   \
  CURL_FN(multi_cleanup, curl_multi_cleanup)             \
  CURL_FN(multi_add_handle, curl_multi_add_handle)       \
  CURL_FN(multi_remove_handle, curl_multi_remove_handle) \
  CURL_FN(multi_perform, curl_multi_perform)             \
  CURL_FN(multi_poll, curl_multi_poll)                   \
  CURL_FN(multi_info_read, curl_multi_info_read)         \
  CURL_FN(slist_append, curl_slist_append)               \
  CURL_FN(slist_free_all, curl_slist_free_all)

struct CurlApi {
#define GF_CURL_MEMBER(member, symbol) decltype(&::symbol) member;
  GF_CURL_ENTRY_POINTS(GF_CURL_MEMBER)
#undef GF_CURL_MEMBER
};

struct LoadedCurl {
  std::optional<DynamicLibrary> lib;
  CurlApi api{};
  std::string error;
};

// Loaded once, race-free (function-local static); never unloaded. curl_global_init runs here too:
// it is not thread-safe on every libcurl build.
const LoadedCurl& loaded_curl() {
  static const LoadedCurl curl = [] {
    LoadedCurl c;
    auto lib = DynamicLibrary::open("libcurl.so.4");
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
#define GF_CURL_GET(member, symbol) get(c.api.member, #symbol);
    GF_CURL_ENTRY_POINTS(GF_CURL_GET)
#undef GF_CURL_GET
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

// One transfer: its request, the response being built, and the curl handle with what it points to.
struct Transfer {
  const HttpRequest* request = nullptr;
  HttpResponse response;
  bool too_large = false;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::unique_ptr<CURL, EasyDeleter> easy;
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  std::string no_proxy;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {
    // A new status line starts a new header block (after a 100 Continue, say): forget the old one.
    t->response = HttpResponse{};
    const auto sp = line.find(' ');
    if (sp != std::string_view::npos)
      std::from_chars(line.data() + sp + 1, line.data() + line.size(), t->response.status);
    return line.size();
  }
  const auto colon = line.find(':');
  if (colon != std::string_view::npos && t->response.headers.size() < 100) {
    auto name = core::lower(core::trim(line.substr(0, colon)));
    const auto value = core::trim(line.substr(colon + 1));
    if (name == "content-type") t->response.content_type = std::string(value);
    auto it = std::find_if(t->response.headers.begin(), t->response.headers.end(),
                           [&](const auto& h) { return h.first == name; });
    if (it != t->response.headers.end())
      it->second = std::string(value);
    else
      t->response.headers.emplace_back(std::move(name), std::string(value));
  }
  return line.size();
}

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view chunk(data, size * count);
  const HttpRequest& rq = *t->request;
  if (t->response.status >= 300) {
    const auto room = kMaxErrorBodyBytes - std::min(kMaxErrorBodyBytes, t->response.body.size());
    t->response.body.append(chunk.substr(0, room));
  } else if (rq.on_body) {
    rq.on_body(t->response.content_type, chunk);
  } else {
    if (rq.max_body_bytes != 0 && t->response.body.size() + chunk.size() > rq.max_body_bytes) {
      t->too_large = true;
      return 0;  // curl fails the transfer with CURLE_WRITE_ERROR
    }
    t->response.body.append(chunk);
  }
  return chunk.size();
}

bool is_tls_error(CURLcode rc) {
  switch (rc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT: return true;
    default: return false;
  }
}

void set_blob(const CurlApi& api, CURL* h, CURLoption opt, const std::string& pem) {
  curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  api.easy_setopt(h, opt, &blob);
}

// Prepares t->easy for t->request; false (with t->errbuf) when curl cannot be initialised.
bool prepare(const CurlApi& api, Transfer& t) {
  t.easy.reset(api.easy_init());
  if (!t.easy) return false;
  const HttpRequest& rq = *t.request;
  CURL* h = t.easy.get();
  api.easy_setopt(h, CURLOPT_URL, rq.url.c_str());
  api.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM-based DNS timeouts in a threaded program
  api.easy_setopt(h, CURLOPT_ERRORBUFFER, t.errbuf);
  api.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(rq.connect_timeout.count()));
  if (rq.timeout)
    api.easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<long long>(1, rq.timeout->count())));
  api.easy_setopt(h, CURLOPT_HEADERFUNCTION, &on_header);
  api.easy_setopt(h, CURLOPT_HEADERDATA, &t);
  api.easy_setopt(h, CURLOPT_WRITEFUNCTION, &on_write);
  api.easy_setopt(h, CURLOPT_WRITEDATA, &t);
  api.easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // gzip where the server offers it (Prometheus does)
  if (!rq.unix_socket.empty()) {
    api.easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, rq.unix_socket.c_str());
    api.easy_setopt(h, CURLOPT_PROXY, "");  // a local socket never goes through $http_proxy
  } else {
    // Proxies from the environment apply (as kubectl and curl do), but never to loopback.
    const char* env = std::getenv("no_proxy");
    if (env == nullptr) env = std::getenv("NO_PROXY");
    t.no_proxy =
        env != nullptr && *env != '\0' ? std::string(env) + ",localhost,127.0.0.1,::1" : "localhost,127.0.0.1,::1";
    api.easy_setopt(h, CURLOPT_NOPROXY, t.no_proxy.c_str());
  }

  const TlsOptions& tls = rq.tls;
  if (!tls.ca_file.empty()) api.easy_setopt(h, CURLOPT_CAINFO, tls.ca_file.c_str());
  if (!tls.ca_pem.empty()) set_blob(api, h, CURLOPT_CAINFO_BLOB, tls.ca_pem);
  if (!tls.client_cert_file.empty()) api.easy_setopt(h, CURLOPT_SSLCERT, tls.client_cert_file.c_str());
  if (!tls.client_cert_pem.empty()) set_blob(api, h, CURLOPT_SSLCERT_BLOB, tls.client_cert_pem);
  if (!tls.client_key_file.empty()) api.easy_setopt(h, CURLOPT_SSLKEY, tls.client_key_file.c_str());
  if (!tls.client_key_pem.empty()) set_blob(api, h, CURLOPT_SSLKEY_BLOB, tls.client_key_pem);
  if (!tls.client_cert_pem.empty() || !tls.client_cert_file.empty()) api.easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
  if (tls.insecure_skip_verify) {
    api.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    api.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }

  // "Expect:" switches off curl's 100-continue round trip for larger bodies; no server here needs it.
  curl_slist* list = api.slist_append(nullptr, "Expect:");
  if (rq.body) list = api.slist_append(list, ("Content-Type: " + rq.content_type).c_str());
  if (!rq.bearer_token.empty()) list = api.slist_append(list, ("Authorization: Bearer " + rq.bearer_token).c_str());
  for (const auto& [name, value] : rq.headers) list = api.slist_append(list, (name + ": " + value).c_str());
  t.headers.reset(list);
  api.easy_setopt(h, CURLOPT_HTTPHEADER, t.headers.get());

  if (rq.method == "POST") {
    api.easy_setopt(h, CURLOPT_POST, 1L);
  } else if (rq.method == "HEAD") {
    api.easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (rq.method != "GET") {
    api.easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq.method.c_str());
  }
  if (rq.body || rq.method == "POST") {
    // An explicit size of 0 makes a body-less POST send "Content-Length: 0", which servers want.
    const char* body = rq.body ? rq.body->c_str() : "";
    api.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(rq.body ? rq.body->size() : 0));
    api.easy_setopt(h, CURLOPT_POSTFIELDS, body);  // not copied: the request outlives the transfer
  }
  return true;
}

// curl's own words about a failure, safe to show: a URL in them loses its userinfo, and the request's
// userinfo (or its password part) quoted without its URL is masked too. The callers name the URL
// themselves, through url_for_display.
std::string without_credentials(std::string text, std::string_view url) {
  text = redact_urls(text);
  if (!url_has_userinfo(url)) return text;
  const auto from = url.find("://") + 3;
  const auto end = std::min(url.find_first_of("/?#", from), url.size());
  const auto at = url.substr(from, end - from).rfind('@');
  if (at == std::string_view::npos) return text;
  const std::string_view userinfo = url.substr(from, at);
  const auto colon = userinfo.find(':');
  // Short parts are left alone: masking every "a" in a message would say nothing and hide nothing.
  for (const std::string_view secret :
       {userinfo, colon == std::string_view::npos ? std::string_view() : userinfo.substr(colon + 1)}) {
    if (secret.size() < 4) continue;
    for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3))
      text.replace(pos, secret.size(), "***");
  }
  return text;
}

HttpOutcome finish(const CurlApi& api, Transfer& t, CURLcode rc) {
  if (rc == CURLE_OK) return std::move(t.response);
  long os_errno = 0;
  api.easy_getinfo(t.easy.get(), CURLINFO_OS_ERRNO, &os_errno);
  const std::string detail = without_credentials(
      t.errbuf[0] != '\0' ? std::string(t.errbuf) : std::string(api.easy_strerror(rc)), t.request->url);
  if (t.too_large) {
    return TransportError{TransportFailure::TooLarge,
                          fmt::format("response larger than {} bytes", t.request->max_body_bytes), 0};
  }
  if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY) {
    return TransportError{TransportFailure::Unreachable, "cannot connect: " + detail, os_errno};
  }
  if (rc == CURLE_OPERATION_TIMEDOUT) return TransportError{TransportFailure::TimedOut, "timed out: " + detail, 0};
  if (is_tls_error(rc)) return TransportError{TransportFailure::Tls, "TLS: " + detail, 0};
  return TransportError{TransportFailure::Other, detail, os_errno};
}

}  // namespace

std::string HttpResponse::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return {};
}

std::vector<HttpOutcome> http_perform_all(const std::vector<HttpRequest>& requests, std::size_t max_parallel) {
  std::vector<HttpOutcome> out;
  out.reserve(requests.size());
  if (!loaded_curl().lib) {
    for (std::size_t i = 0; i < requests.size(); ++i)
      out.emplace_back(TransportError{TransportFailure::Other, loaded_curl().error, 0});
    return out;
  }
  const CurlApi& api = curl();
  std::vector<std::optional<HttpOutcome>> results(requests.size());
  std::vector<std::unique_ptr<Transfer>> transfers(requests.size());
  std::unique_ptr<CURLM, MultiDeleter> multi(api.multi_init());
  if (!multi) {
    for (std::size_t i = 0; i < requests.size(); ++i)
      out.emplace_back(TransportError{TransportFailure::Other, "cannot initialise libcurl", 0});
    return out;
  }
  max_parallel = std::max<std::size_t>(1, max_parallel);
  std::size_t next = 0, running_count = 0;
  auto start_more = [&] {
    while (next < requests.size() && running_count < max_parallel) {
      auto t = std::make_unique<Transfer>();
      t->request = &requests[next];
      if (!prepare(api, *t)) {
        results[next] = HttpOutcome(TransportError{TransportFailure::Other, "cannot initialise libcurl", 0});
      } else {
        api.easy_setopt(t->easy.get(), CURLOPT_PRIVATE, reinterpret_cast<char*>(next));
        api.multi_add_handle(multi.get(), t->easy.get());
        transfers[next] = std::move(t);
        ++running_count;
      }
      ++next;
    }
  };
  auto cancelled = [&](std::size_t i) { return requests[i].cancel != nullptr && requests[i].cancel->load(); };

  start_more();
  while (running_count > 0) {
    int still = 0;
    if (api.multi_perform(multi.get(), &still) != CURLM_OK) break;
    int left = 0;
    while (CURLMsg* msg = api.multi_info_read(multi.get(), &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      char* priv = nullptr;
      api.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
      const auto i = reinterpret_cast<std::size_t>(priv);
      const CURLcode rc = msg->data.result;
      api.multi_remove_handle(multi.get(), msg->easy_handle);
      results[i] = finish(api, *transfers[i], rc);
      transfers[i].reset();
      --running_count;
    }
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      if (transfers[i] && cancelled(i)) {
        api.multi_remove_handle(multi.get(), transfers[i]->easy.get());
        transfers[i].reset();
        results[i] = HttpOutcome(TransportError{TransportFailure::Cancelled, "cancelled", 0});
        --running_count;
      }
    }
    start_more();
    if (running_count == 0) break;
    if (api.multi_poll(multi.get(), nullptr, 0, kPollIntervalMs, nullptr) != CURLM_OK) break;
  }
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (transfers[i]) api.multi_remove_handle(multi.get(), transfers[i]->easy.get());
    out.push_back(results[i]
                      ? std::move(*results[i])
                      : HttpOutcome(TransportError{TransportFailure::Other, "libcurl's transfer loop failed", 0}));
  }
  return out;
}

HttpOutcome http_perform(const HttpRequest& request) {
  auto all = http_perform_all({request}, 1);
  return std::move(all.front());
}

std::string url_escape(std::string_view s) {
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

}  // namespace gf::platform
