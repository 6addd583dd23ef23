#pragma once
// Where the Kubernetes API server is and how to authenticate to it, found the way kubectl finds it:
// --kubeconfig FILE, else $KUBECONFIG (a colon-separated list, merged), else ~/.kube/config, else the
// pod's service account when KUBERNETES_SERVICE_HOST is set (in-cluster).
// The loader reads files but never the environment: the caller fills KubeConfigOptions from it, so
// tests control every input. Pure functions otherwise; thread-safe.
#include <optional>
#include <string>
#include <string_view>

#include "core/result.hpp"
#include "platform/http_client.hpp"

namespace gf::cluster {

struct KubeConfig {
  std::string server;        // "https://10.0.0.1:6443", no trailing slash (may carry a path prefix)
  std::string namespace_;    // the context's namespace; "default" when it names none
  platform::TlsOptions tls;  // CA, client certificate and key (files or decoded PEM), insecure flag
  std::string bearer_token;  // empty: none (client certificate, or no authentication)
  std::string source;        // "/home/ana/.kube/config, context prod", or "in-cluster"
};

struct KubeConfigOptions {
  std::string kubeconfig;      // --kubeconfig: this file only
  std::string context;         // --context; empty: the current-context
  bool in_cluster = false;     // --in-cluster: use the service account even when a kubeconfig exists
  std::string env_kubeconfig;  // $KUBECONFIG
  std::string home;            // $HOME (for ~/.kube/config)
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::string service_host;  // $KUBERNETES_SERVICE_HOST
  std::string service_port;  // $KUBERNETES_SERVICE_PORT (443 when empty)
};

// The cluster, user and namespace of the chosen context. Errors are one line that names the file, the
// context, cluster or user that is missing, or the unsupported authentication (exec and auth-provider
// plugins, basic auth: use a token or a client certificate instead).
Result<KubeConfig> load_kube_config(const KubeConfigOptions& options);

// The chosen context (empty: current-context) of one kubeconfig text as if read from file_name, without
// touching the filesystem: relative paths are resolved against file_name's directory but not checked,
// and a tokenFile is not read (bearer_token stays empty). For the fuzzer and tests.
Result<KubeConfig> parse_kube_config(std::string_view yaml, const std::string& file_name,
                                     const std::string& context = {});

// Why talking to this API server is unsafe, as one warning line: "TLS verification is off for <server>"
// (insecure-skip-tls-verify on an https:// server) or "sending a bearer token over plain http to
// <server>"; empty when neither. The server is shown without userinfo.
std::string insecure_transport(const KubeConfig& config);

// Decodes standard base64 (RFC 4648), padding optional, whitespace ignored; nullopt on any other
// character or a truncated quantum. Exposed for tests and the fuzzer. Not YAML::DecodeBase64: yaml-cpp
// 0.7's cannot tell bad input from empty input ("a" and "" both give nothing), decodes '=' inside the
// data as zero bits ("aGVsbG8=x") and drops an unpadded last quantum ("aGVsbG8" gives "hel").
std::optional<std::string> decode_base64(std::string_view text);

}  // namespace gf::cluster
