#pragma once
// AgentSocket: the Unix stream socket through which every user's CLI talks to the node's arbiter
// (docs/agent-socket.md). It learns who connects from SO_PEERCRED (never from the request), greets,
// reads bounded request lines, hands them to node::Arbiter and writes the replies in order; a client
// that does not read what it is sent is dropped. The `get` op serves the Router's read-only routes.
// It runs one I/O thread of its own, which also drives the arbiter's timer work (Arbiter::tick), and
// one worker thread for the heavy reads (issue 20, finding 3).
// Thread-safety: start/stop from one thread; the arbiter may be used by others meanwhile.
#include <cstddef>
#include <memory>
#include <string>

#include "core/result.hpp"
#include "node/arbiter.hpp"
#include "server/router.hpp"

namespace gf::server {

struct AgentSocketOptions {
  std::string path;
  std::string version;      // in the greeting
  std::string admin_group;  // members are admins (besides root); empty: none
  std::size_t max_connections = 4096;
  // Each `run` holds one connection while it waits and runs: a user queueing a few hundred jobs needs as
  // many; more than this from one uid are answered "too many connections" and closed.
  std::size_t max_per_uid = 512;
  std::size_t max_unsent_bytes = 4 << 20;  // a client further behind than this is dropped
  // The heavy reads (`jobs`, `job`, `get`) run on a worker thread of their own, one user's after
  // another's in turn, so they never hold up a greeting, a lease or another user's read. A reply is at
  // most max_reply_bytes (a `jobs` list stops there and says `truncated`; a larger `get` body is
  // refused), and a uid whose connections have more than max_unsent_per_uid bytes of replies not yet
  // read gets its heavy reads refused until it reads them.
  std::size_t max_reply_bytes = 8 << 20;
  std::size_t max_unsent_per_uid = 64 << 20;
  bool auth_read = false;  // the agent's reads need its token: `get` is for admins only; `leases`, `jobs`, `job`
                           // show a non-admin only their own records
};

// The socket path when none is configured: /run/gpufleet/agent.sock for root, else
// $XDG_RUNTIME_DIR/gpufleet/agent.sock, else /tmp/gpufleet-<uid>/agent.sock.
std::string default_agent_socket_path();

// Makes the socket's directory (0755 for root, 0700 for a user) or checks the one there: it must be a
// real directory owned by us and writable by no one else. The error names the directory.
Result<void> prepare_socket_dir(const std::string& dir);

class AgentSocket {
 public:
  // Binds and starts serving. router (read-only routes for `get`) may be null; it and the arbiter
  // outlive the socket. A stale socket file of ours is replaced; another agent listening there, or a
  // file we do not own, is an error.
  static Result<std::unique_ptr<AgentSocket>> start(node::Arbiter& arbiter, const Router* router,
                                                    AgentSocketOptions options);
  ~AgentSocket();
  AgentSocket(const AgentSocket&) = delete;
  AgentSocket& operator=(const AgentSocket&) = delete;

  // Stops serving and removes the socket file. Connections close without ending their leases (the
  // next start ends them as "agent restarted"). Idempotent.
  void stop();
  const std::string& path() const noexcept;
  std::size_t connections() const;

  struct Impl;

 private:
  explicit AgentSocket(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::server
