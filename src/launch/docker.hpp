#pragma once
// A Docker Engine API client over the engine's unix socket, for `gpufleet run --docker IMAGE`.
//
// The chosen GPUs reach the container the way `docker run --gpus '"device=0,1"'` passes them: one
// HostConfig.DeviceRequests entry {Driver "", Count 0, DeviceIDs [...], Capabilities [["gpu"]]}.
// CUDA_VISIBLE_DEVICES is never passed (see create_request_body).
//
// API version: the client speaks v1.41 (Docker 20.10, the oldest engine gpufleet supports) until ping()
// has asked the engine, then the engine's own version capped at kNewestApiVersion. A fixed version would
// rot: Docker 29 refuses anything older than v1.44 (moby/moby#51186). run() always pings first.
//
// Thread-safety: one DockerClient belongs to one thread (ping() changes the version it speaks). The only
// cross-thread input is run()'s cancel flag, which another thread may set at any time; it is noticed
// within ~50 ms. Every request opens its own connection, so separate clients never interfere.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace gf::launch {

inline constexpr std::string_view kDefaultDockerSocket = "/var/run/docker.sock";
inline constexpr std::string_view kOldestApiVersion = "1.41";  // Docker 20.10
inline constexpr std::string_view kNewestApiVersion = "1.52";  // Docker 29; endpoints used are unchanged
inline constexpr std::size_t kDefaultLogsTailBytes = 64 * 1024;

struct DockerRunSpec {
  std::string image;
  std::vector<std::string> cmd;      // empty: the image's default command
  std::vector<std::string> gpu_ids;  // "0", "1" or UUIDs ("GPU-…"); empty: no GPU at all
  std::vector<std::string> env;      // KEY=VALUE; CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES are dropped
  std::string name;                  // empty: the engine picks one
  std::map<std::string, std::string> labels;
  // "HOST:CONTAINER[:ro]" bind mounts, as `docker run -v`; the host path is absolute.
  std::vector<std::string> binds;
  // Published ports, as `docker run -p [IP:]HOST_PORT:CONTAINER_PORT` (TCP).
  struct Port {
    std::string host_ip;  // empty: every address
    unsigned host_port = 0;
    unsigned container_port = 0;
  };
  std::vector<Port> ports;
  bool remove = true;           // like `docker run --rm`, but done by us after the logs are read
  int stop_grace_seconds = 10;  // on cancel: SIGTERM, then SIGKILL after this many seconds
};

struct DockerRunResult {
  std::string container_id;
  int exit_code = -1;
  std::string logs_tail;              // last kDefaultLogsTailBytes of stdout+stderr, in arrival order
  std::vector<std::string> warnings;  // engine warnings from create; logs or cleanup that failed
};

// The JSON body of POST /containers/create for `spec` (exposed for tests and a future --dry-run).
std::string create_request_body(const DockerRunSpec& spec);

// `docker run -v` and `-p` as the command line gives them: "HOST:CONTAINER[:ro|:rw]" with absolute paths,
// and "[IP:]HOST_PORT:CONTAINER_PORT". One error sentence naming the value otherwise.
Result<std::string> parse_bind(std::string_view text);
Result<DockerRunSpec::Port> parse_port(std::string_view text);

class DockerClient {
 public:
  explicit DockerClient(std::string socket_path = std::string(kDefaultDockerSocket));

  // DOCKER_HOST as the docker CLI reads it: unset or empty → the default socket; unix:///path → path.
  // tcp://, ssh:// and npipe:// are refused with a clear error (this client speaks unix sockets only).
  static Result<DockerClient> from_environment();
  static Result<DockerClient> from_docker_host(std::string_view docker_host);

  const std::string& socket_path() const noexcept { return socket_path_; }
  const std::string& api_version() const noexcept { return api_version_; }  // e.g. "1.41"

  // GET /_ping (unversioned): checks the body is "OK", reads Api-Version, and from then on speaks
  // min(engine version, kNewestApiVersion). Returns that version; an engine older than 1.41 is an error.
  Result<std::string> ping();
  // POST /containers/create[?name=] → the container id. Engine warnings are dropped here; run() keeps them.
  Result<std::string> create(const DockerRunSpec& spec);
  // POST /containers/{id}/start; "already started" (304) is success.
  Result<void> start(const std::string& id);
  // POST /containers/{id}/wait → the exit code. Without a timeout it waits as long as the container runs.
  Result<int> wait(const std::string& id, std::optional<std::chrono::milliseconds> timeout = {});
  // GET /containers/{id}/logs?stdout=1&stderr=1 → the last tail_bytes of both streams, demultiplexed.
  // Memory stays O(tail_bytes) however long the log is.
  Result<std::string> logs(const std::string& id, std::size_t tail_bytes);
  // POST /containers/{id}/stop?t=N; "already stopped" (304) is success. Blocks up to ~N seconds.
  Result<void> stop(const std::string& id, int grace_seconds);
  // DELETE /containers/{id}?force=&v=1 (anonymous volumes go too, as with `docker run --rm`).
  Result<void> remove(const std::string& id, bool force);

  // ping, create, start, wait, logs, remove (if spec.remove). When start fails the container is removed
  // whatever spec.remove says (it never ran, there is nothing to inspect). When *cancel becomes true, or
  // waiting fails, the container is stopped and (if spec.remove) removed, and an error is returned.
  // A non-zero exit code is not an error: it is in DockerRunResult::exit_code.
  Result<DockerRunResult> run(const DockerRunSpec& spec, std::atomic<bool>* cancel = nullptr);

 private:
  struct Created {
    std::string id;
    std::vector<std::string> warnings;
  };
  Result<Created> create_container(const DockerRunSpec& spec);
  Result<int> wait_until(const std::string& id, std::optional<std::chrono::milliseconds> timeout,
                         const std::atomic<bool>* cancel);
  std::string url(std::string_view path_and_query) const;

  std::string socket_path_;
  std::string api_version_{kOldestApiVersion};
};

}  // namespace gf::launch
