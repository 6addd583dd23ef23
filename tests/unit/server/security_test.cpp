#include "server/security.hpp"
#include "support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

namespace gf::server {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// ---- bearer_ok ---------------------------------------------------------------------------------

TEST(BearerOk, ExactTokenWithAnyCaseOfTheScheme) {
  EXPECT_TRUE(bearer_ok("Bearer abc123", "abc123"));
  EXPECT_TRUE(bearer_ok("bearer abc123", "abc123"));
  EXPECT_TRUE(bearer_ok("BEARER abc123", "abc123"));
  EXPECT_TRUE(bearer_ok("BeArEr abc123", "abc123"));
}

TEST(BearerOk, AnythingElseIsRefused) {
  EXPECT_FALSE(bearer_ok("Bearer abc124", "abc123"));
  EXPECT_FALSE(bearer_ok("Bearer ABC123", "abc123"));   // the token itself is case-sensitive
  EXPECT_FALSE(bearer_ok("Bearer abc12", "abc123"));    // shorter
  EXPECT_FALSE(bearer_ok("Bearer abc1234", "abc123"));  // longer
  EXPECT_FALSE(bearer_ok("Bearer  abc123", "abc123"));
  EXPECT_FALSE(bearer_ok("Basic  abc123", "abc123"));  // same length, other scheme
  EXPECT_FALSE(bearer_ok("Bearer_abc123", "abc123"));
  EXPECT_FALSE(bearer_ok("abc123", "abc123"));
  EXPECT_FALSE(bearer_ok("", "abc123"));
}

TEST(BearerOk, EmptyTokenNeverMatches) {
  EXPECT_FALSE(bearer_ok("Bearer ", ""));
  EXPECT_FALSE(bearer_ok("Bearer", ""));
  EXPECT_FALSE(bearer_ok("", ""));
}

// ---- origin_allowed ----------------------------------------------------------------------------

// Issue 12, Host check (DNS rebinding): a page that rebinds evil.example to 127.0.0.1 sends
// "Host: evil.example"; on main every Host was served.
TEST(HostAllowed, IpLiteralsAndLoopbackNamesWithAnyPort) {
  for (const char* h : {"127.0.0.1", "127.0.0.1:9401", "10.1.2.3:80", "[::1]", "[::1]:9401", "[fe80::1]:1", "localhost",
                        "LOCALHOST:9401", "localhost.", "app.localhost", "a.b.localhost:8080"})
    EXPECT_TRUE(host_allowed(h, {})) << h;
}

TEST(HostAllowed, OtherNamesAreRefusedUnlessListed) {
  for (const char* h : {"evil.example", "evil.example:9401", "localhost.evil.example", "notlocalhost",
                        "127.0.0.1.evil.example", "gpu-node-3", "2130706433", "0x7f.1", "[::1", "[::1]x", "::1", "",
                        "host:", "host:port", "host:123456", "a b", "user@127.0.0.1", ".localhost"})
    EXPECT_FALSE(host_allowed(h, {})) << h;
  const std::vector<std::string> names = {"gpu-node-3", "Gpu-Node-3.Lab.Example."};
  EXPECT_TRUE(host_allowed("gpu-node-3", names));
  EXPECT_TRUE(host_allowed("GPU-NODE-3:9401", names));
  EXPECT_TRUE(host_allowed("gpu-node-3.lab.example", names));
  EXPECT_TRUE(host_allowed("gpu-node-3.lab.example.:80", names));
  EXPECT_FALSE(host_allowed("gpu-node-3.evil.example", names));
  EXPECT_FALSE(host_allowed("node-3", names));
}

TEST(HostAllowed, TheMachinesOwnNameIsAllowed) {
  const auto names = machine_host_names();
  ASSERT_FALSE(names.empty()) << "gethostname gave nothing";
  EXPECT_TRUE(host_allowed(names.front(), names));
  EXPECT_TRUE(host_allowed(names.front() + ":9401", names));
}

TEST(OriginAllowed, AbsentOriginIsNotABrowser) { EXPECT_TRUE(origin_allowed("", "10.0.0.5", 9090, {})); }

TEST(OriginAllowed, SameHostAndPort) {
  EXPECT_TRUE(origin_allowed("http://10.0.0.5:9090", "10.0.0.5", 9090, {}));
  EXPECT_TRUE(origin_allowed("HTTP://Gpu-Node:9090", "gpu-node", 9090, {}));
  EXPECT_FALSE(origin_allowed("http://10.0.0.5:9091", "10.0.0.5", 9090, {}));
  EXPECT_FALSE(origin_allowed("http://10.0.0.6:9090", "10.0.0.5", 9090, {}));
  EXPECT_FALSE(origin_allowed("http://evil.example:9090", "10.0.0.5", 9090, {}));
  EXPECT_FALSE(origin_allowed("http://10.0.0.5.evil.example:9090", "10.0.0.5", 9090, {}));
}

TEST(OriginAllowed, LoopbackAliasesAreOneHost) {
  for (const char* listen : {"127.0.0.1", "localhost", "::1"}) {
    EXPECT_TRUE(origin_allowed("http://127.0.0.1:8080", listen, 8080, {})) << listen;
    EXPECT_TRUE(origin_allowed("http://localhost:8080", listen, 8080, {})) << listen;
    EXPECT_TRUE(origin_allowed("http://[::1]:8080", listen, 8080, {})) << listen;
    EXPECT_FALSE(origin_allowed("http://localhost:8081", listen, 8080, {})) << listen;
    EXPECT_FALSE(origin_allowed("http://192.168.1.2:8080", listen, 8080, {})) << listen;
  }
  // A non-loopback listener does not accept loopback origins as itself.
  EXPECT_FALSE(origin_allowed("http://localhost:8080", "10.0.0.5", 8080, {}));
}

TEST(OriginAllowed, DefaultPortsOfTheScheme) {
  EXPECT_TRUE(origin_allowed("http://gpu-node", "gpu-node", 80, {}));
  EXPECT_TRUE(origin_allowed("https://gpu-node", "gpu-node", 443, {}));
  EXPECT_FALSE(origin_allowed("https://gpu-node", "gpu-node", 80, {}));
  EXPECT_FALSE(origin_allowed("http://gpu-node", "gpu-node", 443, {}));
  EXPECT_FALSE(origin_allowed("http://[::1]", "::1", 8080, {}));
}

TEST(OriginAllowed, GarbageIsRefused) {
  for (const char* o :
       {"null", "gpu-node:9090", "ftp://gpu-node:9090", "http://gpu-node:", "http://gpu-node:90x0",
        "http://gpu-node:999999", "http://gpu-node:9090/path", "://gpu-node:9090", "http://", "javascript:alert(1)"})
    EXPECT_FALSE(origin_allowed(o, "gpu-node", 9090, {})) << o;
}

TEST(OriginAllowed, ExtraOriginsMatchWhole) {
  const std::vector<std::string> extra = {"https://dash.example.com", "http://grafana.local:3000"};
  EXPECT_TRUE(origin_allowed("https://dash.example.com", "10.0.0.5", 9090, extra));
  EXPECT_TRUE(origin_allowed("HTTPS://DASH.example.com", "10.0.0.5", 9090, extra));
  EXPECT_TRUE(origin_allowed("http://grafana.local:3000", "10.0.0.5", 9090, extra));
  EXPECT_FALSE(origin_allowed("https://dash.example.com:444", "10.0.0.5", 9090, extra));
  EXPECT_FALSE(origin_allowed("http://dash.example.com", "10.0.0.5", 9090, extra));
  EXPECT_FALSE(origin_allowed("http://grafana.local:3001", "10.0.0.5", 9090, extra));
}

// ---- resolve_static ----------------------------------------------------------------------------

struct ResolveStatic : ::testing::Test {
  test::TempDir tmp;
  fs::path base, root;
  void SetUp() override {
    base = tmp.path();
    root = base / "web";
    write(root / "index.html", "<html>");
    write(root / "assets/app.js", "js");
    write(root / "docs/index.html", "docs");
    fs::create_directories(root / "empty");
    write(base / "secret.txt", "secret");
    write(base / "web2/other.txt", "neighbour");  // shares the root's name as a prefix
  }
  void TearDown() override { fs::remove_all(base); }
  fs::path real(const fs::path& p) { return fs::canonical(p); }
};

TEST_F(ResolveStatic, SlashAndDirectoriesMeanIndexHtml) {
  EXPECT_EQ(resolve_static(root, "/"), real(root / "index.html"));
  EXPECT_EQ(resolve_static(root, "/index.html"), real(root / "index.html"));
  EXPECT_EQ(resolve_static(root, "/docs"), real(root / "docs/index.html"));
  EXPECT_EQ(resolve_static(root, "/docs/"), real(root / "docs/index.html"));
  EXPECT_EQ(resolve_static(root, "/assets/app.js"), real(root / "assets/app.js"));
}

TEST_F(ResolveStatic, MissingFilesAndIndexlessDirectories) {
  EXPECT_EQ(resolve_static(root, "/nope.js"), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/assets/"), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/empty"), std::nullopt);
  EXPECT_EQ(resolve_static(base / "no-such-root", "/"), std::nullopt);
}

TEST_F(ResolveStatic, DotDotIsRefusedEvenWhenItWouldStayInside) {
  EXPECT_EQ(resolve_static(root, "/../secret.txt"), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/assets/../../secret.txt"), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/assets/../index.html"), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/.."), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/../web2/other.txt"), std::nullopt);
}

TEST_F(ResolveStatic, DecodedTraversalIsRefusedAndAnUndecodedOneIsJustAName) {
  // The transport decodes "%2e%2e%2f" before calling: what arrives is "../".
  EXPECT_EQ(resolve_static(root, "/assets/../../secret.txt"), std::nullopt);
  // Given undecoded, "%2e%2e" is a file name that does not exist: still nothing outside.
  EXPECT_EQ(resolve_static(root, "/%2e%2e/secret.txt"), std::nullopt);
}

TEST_F(ResolveStatic, BadShapesAreRefused) {
  EXPECT_EQ(resolve_static(root, ""), std::nullopt);
  EXPECT_EQ(resolve_static(root, "index.html"), std::nullopt);  // not absolute
  EXPECT_EQ(resolve_static(root, std::string_view("/index.html\0.js", 15)), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/assets\\..\\..\\secret.txt"), std::nullopt);
  // An absolute path after the slash must not replace the root.
  EXPECT_EQ(resolve_static(root, "//" + (base / "secret.txt").string().substr(1)), std::nullopt);
}

TEST_F(ResolveStatic, SymlinksOutOfTheRootAreRefused) {
  fs::create_symlink(base / "secret.txt", root / "leak.txt");
  fs::create_directory_symlink(base / "web2", root / "neighbour");
  fs::create_symlink(root / "assets/app.js", root / "alias.js");
  EXPECT_EQ(resolve_static(root, "/leak.txt"), std::nullopt);
  EXPECT_EQ(resolve_static(root, "/neighbour/other.txt"), std::nullopt);
  // A link that stays inside is fine.
  EXPECT_EQ(resolve_static(root, "/alias.js"), real(root / "assets/app.js"));
}

TEST_F(ResolveStatic, RootThatIsItselfASymlinkStillWorks) {
  fs::create_directory_symlink(root, base / "link-root");
  EXPECT_EQ(resolve_static(base / "link-root", "/assets/app.js"), real(root / "assets/app.js"));
}

TEST(ContentType, ByExtension) {
  EXPECT_EQ(content_type_for("a/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("app.JS"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_for("x.css"), "text/css; charset=utf-8");
  EXPECT_EQ(content_type_for("x.svg"), "image/svg+xml");
  EXPECT_EQ(content_type_for("x.map"), "application/json");
  EXPECT_EQ(content_type_for("x.bin"), "application/octet-stream");
  EXPECT_EQ(content_type_for("noext"), "application/octet-stream");
}

// ---- load_or_create_token ----------------------------------------------------------------------

struct TokenTest : ::testing::Test {
  test::TempDir tmp;
  fs::path dir;
  std::optional<std::string> saved_env;
  void SetUp() override {
    dir = tmp.path();
    if (const char* e = std::getenv("GPUFLEET_TOKEN")) saved_env = e;
    ::unsetenv("GPUFLEET_TOKEN");
  }
  void TearDown() override {
    if (saved_env)
      ::setenv("GPUFLEET_TOKEN", saved_env->c_str(), 1);
    else
      ::unsetenv("GPUFLEET_TOKEN");
  }
};

bool all_hex(const std::string& s) { return s.find_first_not_of("0123456789abcdef") == std::string::npos; }

TEST_F(TokenTest, CreatesA0600FileWith64HexCharsThenReadsItBack) {
  const auto path = (dir / "sub/agent.token").string();  // the directory is created too
  bool created = false;
  auto t = load_or_create_token(path, &created);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(created);
  EXPECT_EQ(t->size(), 64u);
  EXPECT_TRUE(all_hex(*t)) << *t;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, *t);

  bool again = true;
  auto t2 = load_or_create_token(path, &again);
  ASSERT_TRUE(t2);
  EXPECT_FALSE(again);
  EXPECT_EQ(*t2, *t);
}

TEST_F(TokenTest, ExistingFileIsReadTrimmed) {
  const auto path = (dir / "agent.token").string();
  write(path, "my-own-token \r\nsecond line ignored\n");
  bool created = true;
  auto t = load_or_create_token(path, &created);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "my-own-token");
  EXPECT_FALSE(created);
}

TEST_F(TokenTest, EnvironmentWins) {
  const auto path = (dir / "agent.token").string();
  write(path, "from-file\n");
  ::setenv("GPUFLEET_TOKEN", "from-env", 1);
  bool created = true;
  auto t = load_or_create_token(path, &created);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "from-env");
  EXPECT_FALSE(created);
  // No file is created when the environment names the token.
  const auto other = (dir / "none.token").string();
  ASSERT_TRUE(load_or_create_token(other, nullptr));
  EXPECT_FALSE(fs::exists(other));
  // An empty variable does not count.
  ::setenv("GPUFLEET_TOKEN", "", 1);
  auto t2 = load_or_create_token(path, nullptr);
  ASSERT_TRUE(t2);
  EXPECT_EQ(*t2, "from-file");
}

TEST_F(TokenTest, EmptyFileIsAnError) {
  const auto path = (dir / "agent.token").string();
  write(path, "");
  auto t = load_or_create_token(path, nullptr);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("empty"), std::string::npos) << t.error().message;
  write(path, "\n");
  EXPECT_FALSE(load_or_create_token(path, nullptr));
}

TEST_F(TokenTest, RandomTokensDiffer) {
  const auto a = random_token(), b = random_token();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_TRUE(all_hex(a));
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace gf::server
