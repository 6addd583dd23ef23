#pragma once
// KubeStandin: a stand-in Kubernetes API server for tests. HTTP/1.1 on 127.0.0.1:<ephemeral port>,
// served by one Asio thread of its own (Beast stays inside kube_standin.cpp).
//
// It answers like the API server for what gpufleet uses:
//  - GET /api/v1/nodes and GET /api/v1/pods from a fixture ({"nodes": [...], "pods": [...]}), with real
//    pagination (`limit`, opaque `continue` tokens, `metadata.continue`, `metadata.remainingItemCount`)
//    and `fieldSelector` on status.phase and spec.nodeName (=, ==, !=), honoured or ignored;
//  - create-or-update of any namespaced object, kept in memory, at /api/v1/namespaces/{ns}/{plural}[/{name}]
//    and /apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}]: server-side apply (PATCH with
//    application/apply-patch+yaml and ?fieldManager=…; 201 when created, 200 when it existed), POST on
//    the collection (201, or 409 AlreadyExists), GET of one object (200 or 404);
//  - pods/exec as a WebSocket (v5.channel.k8s.io, v4.channel.k8s.io: the server picks by its own
//    preference among those offered), each pod answering as KubeStandinConfig::exec says;
//  - a bearer token check (401 Status otherwise), a 403 Status for pods on demand, and a mode that reads
//    requests and never answers (for timeouts).
// Errors are Status objects, as the API server sends them. Every request is recorded.
//
// Thread-safety: the accessors may be called from any thread while the server runs. The destructor
// stops the thread and closes every connection.
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gf::fakes {

// How one pod answers pods/exec (the WebSocket of v5.channel.k8s.io / v4.channel.k8s.io).
struct KubeStandinExec {
  std::string out;              // sent on stdout, in frames of at most 64 bytes
  std::string err;              // sent on stderr
  int exit_code = 0;            // non-zero: Status Failure, reason NonZeroExitCode, the code in details.causes
  std::string failure_message;  // non-empty: Status Failure, reason InternalError, this message (command not found …)
  bool hang = false;            // upgrade, then send nothing and keep the connection open
  // A --query-gpu field this pod's nvidia-smi does not know: a command naming it gets nvidia-smi's
  // complaint on stdout and exit code 2, as an older driver answers.
  std::string reject_field;
  unsigned delay_ms = 0;  // wait this long after the upgrade before answering (nvidia-smi's run time)
};

struct KubeStandinExecCall {
  std::string pod;  // "namespace/name"
  std::string container;
  std::string protocol;  // the subprotocol chosen; empty when the upgrade was refused
  std::string offered;   // Sec-WebSocket-Protocol as sent
  std::vector<std::string> command;
};

struct KubeStandinConfig {
  std::string fixture_json = R"({"nodes": [], "pods": []})";  // the cluster's nodes and pods
  std::string token;                  // non-empty: every request must carry "Authorization: Bearer <token>"
  bool forbid_pods = false;           // GET /api/v1/pods answers 403 Forbidden
  bool honour_field_selector = true;  // false: fieldSelector is ignored, as some proxies do
  bool never_answer = false;          // read requests, never answer (the connection stays open)
  // pods/exec: by "namespace/name"; a pod not listed answers as one whose image has no such command.
  std::map<std::string, KubeStandinExec> exec;
  // The exec subprotocols this server speaks, its preference first (a 1.29 server: v4 only).
  std::vector<std::string> exec_protocols{"v5.channel.k8s.io", "v4.channel.k8s.io"};
  // Pods not named in `exec` answer as this one when set (benchmarks of many nodes); else "not found".
  std::optional<KubeStandinExec> exec_default;
  bool forbid_exec = false;  // the exec upgrade is answered 403 Forbidden
};

struct KubeStandinRequest {
  std::string method;
  std::string target;                        // as sent: "/api/v1/pods?limit=2&continue=…"
  std::string path;                          // "/api/v1/pods"
  std::map<std::string, std::string> query;  // percent-decoded
  std::string authorization;                 // the Authorization header, as sent
  std::string content_type;
  std::string body;
};

class KubeStandin {
 public:
  explicit KubeStandin(KubeStandinConfig config = {});
  ~KubeStandin();
  KubeStandin(const KubeStandin&) = delete;
  KubeStandin& operator=(const KubeStandin&) = delete;

  unsigned short port() const;
  std::string url() const;  // "http://127.0.0.1:<port>"
  std::vector<KubeStandinRequest> requests() const;
  // How many requests had this method and exactly this path.
  std::size_t count(std::string_view method, std::string_view path) const;
  // The stored object at an item path ("/api/v1/namespaces/ns/pods/x"), as JSON text.
  std::optional<std::string> object(std::string_view item_path) const;
  // Answers every later request with `body` (status 200, content type application/json): for size caps
  // and malformed answers. Empty: normal service again.
  void set_canned_answer(std::string body);
  // Every pods/exec upgrade, in arrival order.
  std::vector<KubeStandinExecCall> exec_calls() const;
  // The most exec streams that were open at once.
  std::size_t max_concurrent_execs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::fakes
