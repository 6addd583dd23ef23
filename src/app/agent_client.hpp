#pragma once
// The CLI's side of the agent socket (docs/agent-socket.md): finding the node's arbiter, one connection
// to it, requests and their replies, progress events. On a node with an agent every verb that reads or
// changes leases and jobs goes through here; without one the verbs use the per-user store directly.
//
// Every wait is bounded: connecting and the greeting take at most kConnectLimit, and a request whose
// agent stays silent for kSilenceLimit (no reply, no event) fails with "the agent at PATH is not
// answering". An AgentClient is used by one thread at a time.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/job.hpp"
#include "core/ports/lease_store.hpp"
#include "core/result.hpp"
#include "platform/unix_socket.hpp"

namespace gf::app {

inline constexpr std::chrono::seconds kAgentConnectLimit{3};
inline constexpr std::chrono::seconds kAgentSilenceLimit{5};
// The limits in force: the defaults above, or both set to $GPUFLEET_AGENT_TIMEOUT seconds (1 to 600)
// on a machine too loaded for them.
std::chrono::seconds agent_connect_limit();
std::chrono::seconds agent_silence_limit();
inline constexpr std::size_t kAgentMaxLine = 64 * 1024;  // the protocol's line limit
// Replies carry job records of up to 1 MiB (job_put's limit) and lists of them: a larger bound for reading.
inline constexpr std::size_t kAgentMaxReply = 64 * 1024 * 1024;

// Where the agent is, or nullopt for "no agent: use the store". `option` is --socket ("" when not given;
// "none" means no agent). Order: --socket, $GPUFLEET_SOCKET, the root agent's /run/gpufleet/agent.sock,
// then this user's own agent ($XDG_RUNTIME_DIR/gpufleet/agent.sock, else /tmp/gpufleet-<uid>/agent.sock).
struct AgentLocation {
  std::string path;
  bool explicit_choice = false;  // named by --socket or GPUFLEET_SOCKET: failing to reach it is an error
  bool own_user = false;         // this user's own agent: a stale socket there falls back to the store
};
std::optional<AgentLocation> find_agent(const std::string& option);

// What the agent saw of us (its greeting's "peer").
struct AgentPeer {
  std::uint32_t uid = 0, gid = 0, pid = 0;
  std::string user;
  bool admin = false;
};

class AgentClient {
 public:
  using Event = std::function<void(const nlohmann::json&)>;

  // Connects and reads the greeting within kAgentConnectLimit.
  static Result<AgentClient> connect(const std::string& path);

  const std::string& path() const { return path_; }
  const AgentPeer& peer() const { return peer_; }

  // Sends {"id": n, "op": op, ...args} and returns n.
  Result<std::int64_t> send(const std::string& op, nlohmann::json args);
  // The reply to request `id` ({"ok": true, ...}); an "ok": false reply becomes an Error of the agent's
  // kind and message. Events for `id` go to on_event; events for no request (lease warnings) are printed
  // on stderr. When *cancel turns true, a `cancel` for `id` is sent once and the wait goes on for the
  // agent's answer.
  Result<nlohmann::json> wait_reply(std::int64_t id, const Event& on_event = {},
                                    const std::atomic<bool>* cancel = nullptr);
  Result<nlohmann::json> call(const std::string& op, nlohmann::json args, const Event& on_event = {},
                              const std::atomic<bool>* cancel = nullptr);

  // A lease this client is ending itself: the agent's lease_ended event for it is not printed.
  void ending(std::string lease_id) { ending_ = std::move(lease_id); }

  // Watches the connection without a request pending (while `run`'s command runs): prints lease warnings,
  // returns false when the agent closed the connection, true when `stop` turned true first.
  bool watch_until(const std::atomic<bool>& stop);

 private:
  AgentClient(std::string path, platform::UnixLineSocket s) : path_(std::move(path)), sock_(std::move(s)) {}
  Error not_answering() const;
  // One message from the agent within `limit`; a malformed line is an error naming the agent.
  Result<nlohmann::json> next_message(std::chrono::milliseconds limit);
  void print_notice(const nlohmann::json& event) const;

  std::string path_;
  platform::UnixLineSocket sock_;
  AgentPeer peer_;
  std::int64_t next_id_ = 1;
  std::string ending_;
};

// The protocol's documents are read back with wire/'s decoders, beside their encoders:
// wire::lease_from_json (wire/json.hpp), wire::waiter_from_json and wire::job_from_json
// (wire/agent_docs.hpp), wire::job_to_json (wire/agent_protocol.hpp).

// "invalid", "permission", … back to the kind (unknown names: Failed).
ErrorKind error_kind_from_name(std::string_view name);

}  // namespace gf::app
