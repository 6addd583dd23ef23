#pragma once
// One command run in a container through the Kubernetes API's pods/exec subresource, over a WebSocket
// (what `kubectl exec` does). The upgrade offers v5.channel.k8s.io, then v4.channel.k8s.io, in one
// Sec-WebSocket-Protocol list, as kubectl's WebSocket executor does; the API server picks the newest
// it speaks (servers before 1.30 pick v4). No stdin, no TTY: stdout and stderr come back, and the
// command's Status on the error channel.
//
// TLS and credentials are the KubeConfig's (CA file or data, else the system's CAs; client certificate
// and key; bearer token; insecure-skip-tls-verify), as KubeClient uses them. Beast and OpenSSL stay in
// exec_client.cpp.
// Thread-safety: exec_in_pod may run on any number of threads at once (each call has its own I/O).
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "cluster/exec_protocol.hpp"
#include "cluster/kubeconfig.hpp"
#include "core/result.hpp"

namespace gf::cluster {

struct ExecRequest {
  std::string namespace_;
  std::string pod;
  std::string container;  // empty: the pod's default container (the API server's choice)
  std::vector<std::string> command;
  std::chrono::milliseconds timeout{10000};  // the whole exchange: connect, TLS, upgrade, command, close
  std::size_t max_output_bytes = 1u << 20;   // per stream; more is cut (ExecOutput's truncated flags)
  // The subprotocols offered, most wanted first.
  std::vector<std::string> protocols{std::string(kExecProtocolV5), std::string(kExecProtocolV4)};
};

struct ExecOutput {
  std::string protocol;  // the subprotocol the API server chose
  std::string out, err;
  bool out_truncated = false, err_truncated = false;
  ExecStatus status;  // the command ran; status says how it ended
};

// Runs the command. Errors (one line, naming the pod and the server): unreachable, TLS, an upgrade the
// API server answers with an HTTP status (401, 403 with the RBAC permission named, 404 …), a
// subprotocol not offered, a malformed stream, no Status, or no end within the timeout. A command that
// ran and failed (non-zero exit, not found in the image) is an ExecOutput whose status says so.
Result<ExecOutput> exec_in_pod(const KubeConfig& config, const ExecRequest& request);

// The request target: "<prefix>/api/v1/namespaces/<ns>/pods/<pod>/exec?command=…&container=…&stdout=true&stderr=true".
std::string exec_target(std::string_view path_prefix, const ExecRequest& request);

}  // namespace gf::cluster
