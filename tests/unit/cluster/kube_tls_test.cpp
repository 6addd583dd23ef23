// TLS as the Kubernetes client uses it, against `openssl s_server` with a self-signed certificate made
// in the test's temp dir: verified with the CA (file or PEM data), refused without it, accepted when
// insecure-skip-tls-verify is set. Skipped, saying why, where openssl is not installed.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster/kube_client.hpp"
#include "platform/subprocess.hpp"
#include "support/eventually.hpp"
#include "support/files.hpp"
#include "support/temp_dir.hpp"

namespace gf::cluster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A port nothing listens on right now (the kernel's choice for a socket bound to port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool accepts_connections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

// `openssl s_server -www` in the background, stopped (SIGTERM, reaped) with the object.
struct SServer {
  SServer(const std::string& openssl, const std::string& cert, const std::string& key, int port) {
    pid = ::fork();
    if (pid == 0) {
      const std::string accept = "127.0.0.1:" + std::to_string(port);
      ::execl(openssl.c_str(), openssl.c_str(), "s_server", "-quiet", "-www", "-accept", accept.c_str(), "-cert",
              cert.c_str(), "-key", key.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~SServer() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
  pid_t pid = -1;
};

TEST(KubeTls, SelfSignedServerWithAndWithoutItsCa) {
  const auto openssl = platform::find_executable("openssl");
  if (!openssl) GTEST_SKIP() << "openssl is not installed: the TLS handshake test needs `openssl s_server`";
  test::TempDir dir;
  const std::string cert = (dir.path() / "cert.pem").string(), key = (dir.path() / "key.pem").string();
  auto made = platform::run_process(
      {*openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
       "-out", cert, "-days", "1", "-subj", "/CN=gpufleet-test", "-addext", "subjectAltName=IP:127.0.0.1"},
      {std::chrono::milliseconds(30000)});
  ASSERT_TRUE(made) << made.error().message;
  ASSERT_EQ(made->exit_code, 0) << made->err;

  const int port = free_port();
  ASSERT_GT(port, 0);
  SServer server(*openssl, cert, key, port);
  ASSERT_GT(server.pid, 0);
  // Readiness, not timing: wait (up to 20 s) until it listens.
  ASSERT_TRUE(test::eventually([&] { return accepts_connections(port); }, std::chrono::seconds(20),
                               std::chrono::milliseconds(50)))
      << "openssl s_server did not start listening";

  KubeConfig c;
  c.server = "https://127.0.0.1:" + std::to_string(port);
  c.source = "test";
  c.tls.ca_file = cert;
  auto with_ca = KubeClient(c).request("GET", "/");
  ASSERT_TRUE(with_ca) << with_ca.error().message;
  EXPECT_EQ(with_ca->status, 200);

  c.tls.ca_file.clear();
  c.tls.ca_pem = test::slurp(cert);  // certificate-authority-data, decoded
  auto with_pem = KubeClient(c).request("GET", "/");
  ASSERT_TRUE(with_pem) << with_pem.error().message;
  EXPECT_EQ(with_pem->status, 200);

  c.tls.ca_pem.clear();
  auto without = KubeClient(c).request("GET", "/");
  ASSERT_FALSE(without);
  EXPECT_THAT(without.error().message, StartsWith("TLS with the API server at " + c.server + " failed (from test)"));
  EXPECT_THAT(without.error().message, HasSubstr("no certificate-authority was given"));

  c.tls.insecure_skip_verify = true;
  auto insecure = KubeClient(c).request("GET", "/");
  ASSERT_TRUE(insecure) << insecure.error().message;
  EXPECT_EQ(insecure->status, 200);
}

}  // namespace
}  // namespace gf::cluster
