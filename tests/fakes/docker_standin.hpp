#pragma once
// DockerStandin: a stand-in Docker engine for tests. HTTP/1.1 on a unix socket in a fresh temp dir,
// served by one Asio thread of its own (Beast stays inside docker_standin.cpp, which is the only
// translation unit that pays its compile cost).
//
// It implements what gf::launch::DockerClient uses — GET /_ping, POST /containers/create,
// POST /containers/{id}/start|wait|stop, GET /containers/{id}/logs, DELETE /containers/{id} — with or
// without a /vX.Y prefix, records every request, and keeps a table of containers: a started container
// "exits" by itself after run_time with exit_code, or at once with 137 when stopped. Errors come as the
// engine sends them: a status and {"message": "..."}.
//
// Thread-safety: the accessors may be called from any thread while the server runs. The destructor stops
// the thread and removes the socket and its directory.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gf::fakes {

struct StandinFrame {
  int stream = 1;  // 1 stdout, 2 stderr
  std::string text;
};

// Answers `status` with {"message": message} for the first request whose method matches and whose path
// (version prefix and query removed) ends with path_suffix, e.g. {"POST", "/start", 500, "..."}.
struct StandinFault {
  std::string method;
  std::string path_suffix;
  int status = 500;
  std::string message;
};

struct DockerStandinConfig {
  std::string api_version = "1.41";  // sent as Api-Version on every response
  std::string min_api_version;       // non-empty: older /vX.Y requests get 400, as Docker 29 does
  int exit_code = 0;
  std::chrono::milliseconds run_time{0};  // how long a started container runs before it exits by itself
  std::vector<StandinFrame> logs;         // what GET .../logs returns
  bool tty = false;                       // logs as raw bytes (a TTY container) instead of frames
  bool label_multiplexed = false;         // Content-Type multiplexed-stream (API >= 1.42) vs raw-stream
  std::set<std::string> missing_images;   // create answers 404 "No such image: <image>"
  std::vector<StandinFault> faults;
};

struct StandinRequest {
  std::string method;       // "POST"
  std::string target;       // as sent: "/v1.41/containers/create?name=x"
  std::string path;         // "/containers/create"
  std::string api_version;  // "1.41"; empty when unversioned
  std::string body;
};

class DockerStandin {
 public:
  explicit DockerStandin(DockerStandinConfig config = {});
  ~DockerStandin();
  DockerStandin(const DockerStandin&) = delete;
  DockerStandin& operator=(const DockerStandin&) = delete;

  const std::string& socket_path() const;
  std::vector<StandinRequest> requests() const;
  // How many requests had this method and a path ending with path_suffix.
  std::size_t count(std::string_view method, std::string_view path_suffix) const;
  // The body of the last POST /containers/create, if any.
  std::optional<std::string> last_create_body() const;
  // Containers created and not (yet) deleted.
  std::vector<std::string> live_containers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gf::fakes
