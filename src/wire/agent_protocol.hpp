#pragma once
// The agent socket's protocol (docs/agent-socket.md): one JSON object per line. parse_agent_request()
// turns one request line into a typed request, or says why not (bounded sizes, checked types, integer
// ids); the render functions write the greeting, replies and events as lines ending in '\n'. No
// sockets here. Locale-free; pure; safe on any input.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "allocator/select.hpp"
#include "core/job.hpp"
#include "core/policy.hpp"
#include "core/ports/lease_store.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"

namespace gf::wire {

inline constexpr int kAgentProtocol = 1;
inline constexpr std::size_t kMaxRequestLine = 64 * 1024;  // bytes, without the '\n'

// An acquire: the GPU need (wire/gpu_need.hpp, the socket's keys) and the lease's own terms. The node's
// arbiter takes it as it is (node::AcquireRequest).
struct AcquireArgs {
  core::GpuNeed need;
  std::string name;
  std::string job_id;  // empty: the arbiter makes one
  int priority = 0;
  std::chrono::milliseconds wait{0};                // "wait_s"; 0: now or never
  core::LeaseTie tie = core::LeaseTie::Connection;  // "connection" (default) or "parent" → Process
};
struct CancelArgs {
  std::int64_t target = 0;
};
struct ReleaseArgs {
  std::string lease;
};
struct LeasesArgs {
  bool all = false;
};
struct JobPutArgs {
  core::Job job;  // owner unset: the agent fills it from the peer
};
struct JobsArgs {
  std::size_t limit = 200;
};
struct JobArgs {
  std::string id;
};
struct GetArgs {
  std::string path;  // an agent REST path with its query
};
using AgentOp = std::variant<AcquireArgs, CancelArgs, ReleaseArgs, LeasesArgs, JobPutArgs, JobsArgs, JobArgs, GetArgs>;

struct ParsedRequest {
  std::optional<std::int64_t> id;  // when the line had a valid one (the error reply carries it)
  Result<AgentOp> op = make_error(ErrorKind::Invalid, "empty request");
  bool close = false;  // the line was too long or not a JSON object: reply, then close the connection
};
ParsedRequest parse_agent_request(std::string_view line);

// What the agent saw of its peer (the greeting's "peer").
struct PeerView {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint32_t pid = 0;
  std::string user;
  bool admin = false;
};
std::string greeting_line(const PeerView& peer, std::string_view version);

// {"id": N, "ok": true, ...result} (result must be an object).
std::string ok_line(std::int64_t id, nlohmann::json result = nlohmann::json::object());
// {"id": N|null, "ok": false, "error": {"kind", "message"}}.
std::string error_line(std::optional<std::int64_t> id, const Error& e);
// {"id": N, "event": "waiting", "waited_s", "why", "ahead", "holders": [lease…]}.
std::string waiting_line(std::int64_t id, double waited_s, const std::string& why, std::size_t ahead,
                         const std::vector<core::Lease>& holders);
std::string lease_warning_line(const std::string& lease, const std::string& message);
std::string lease_ended_line(const std::string& lease, const std::string& reason);
// The results of the other requests (the objects ok_line carries):
// leases: {leases: [lease_json…], waiting: [waiter_json…]} (no node: the client knows which agent it asked).
nlohmann::json leases_result_json(const std::vector<core::Lease>& leases, const std::vector<core::Waiter>& waiting);
// job_put: {job_id}.
nlohmann::json job_put_result_json(const std::string& job_id);
// job_put's "job" as the client sends it: {name, status, started_at_ms, id (when set), command (a JSON
// array), exit_code, ended_at_ms, lease_id, task (when set), record (an object)}; parse_agent_request
// reads it back into JobPutArgs.
nlohmann::json job_to_json(const core::Job& j);
// jobs: {jobs: [job_json…]}.
nlohmann::json jobs_result_json(const std::vector<core::Job>& jobs);
// job: {job: job_json}.
nlohmann::json job_result_json(const core::Job& job);
// get: {status, body}: the route's HTTP status and its body parsed as JSON, or the body as a string
// when it is not JSON, or null when it has none.
nlohmann::json get_result_json(unsigned status, std::optional<std::string_view> body);
// An acquire's result: {lease: lease_json, why: [...], gpu_info}.
nlohmann::json acquire_result_json(const core::Lease& lease, const allocator::Selection& sel, const core::Snapshot& s,
                                   unsigned world_size);

}  // namespace gf::wire
