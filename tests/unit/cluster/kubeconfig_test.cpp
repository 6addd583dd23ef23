// load_kube_config: the kubeconfig convention (--kubeconfig, $KUBECONFIG merged, ~/.kube/config),
// in-cluster service accounts, and the errors for what gpufleet cannot use.
#include "cluster/kubeconfig.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/files.hpp"
#include "support/temp_dir.hpp"

namespace gf::cluster {
namespace {

using test::TempDir;
using ::testing::HasSubstr;

// "-----BEGIN CERTIFICATE-----\nfake\n" and "-----BEGIN PRIVATE KEY-----\nkey\n", base64-encoded.
constexpr const char* kCertB64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmZha2UK";
constexpr const char* kKeyB64 = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCmtleQo=";

std::string config_with(const std::string& cluster, const std::string& user, const std::string& current = "prod") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: " + current +
         "\n"
         "contexts:\n"
         "- name: prod\n  context: {cluster: prod-cluster, user: prod-user, namespace: ml}\n"
         "- name: lab\n  context: {cluster: lab-cluster, user: lab-user}\n"
         "clusters:\n"
         "- name: prod-cluster\n  cluster:\n" +
         cluster +
         "users:\n"
         "- name: prod-user\n  user:\n" +
         user;
}

TEST(KubeConfig, TokenAndCaDataFromExplicitFile) {
  TempDir dir;
  const auto file = test::write_file(dir / "kc.yaml", config_with("    server: https://10.0.0.1:6443/\n"
                                                                  "    certificate-authority-data: " +
                                                                      std::string(kCertB64) + "\n",
                                                                  "    token: abc.def\n"));
  KubeConfigOptions o;
  o.kubeconfig = file;
  o.env_kubeconfig = "/nonexistent/ignored";  // --kubeconfig wins
  auto c = load_kube_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->bearer_token, "abc.def");
  EXPECT_EQ(c->tls.ca_pem, "-----BEGIN CERTIFICATE-----\nfake\n");
  EXPECT_TRUE(c->tls.ca_file.empty());
  EXPECT_FALSE(c->tls.insecure_skip_verify);
  EXPECT_EQ(c->namespace_, "ml");
  EXPECT_EQ(c->source, file + ", context prod");
}

TEST(KubeConfig, ClientCertificateDataAndInsecure) {
  TempDir dir;
  const auto file =
      test::write_file(dir / "kc.yaml", config_with("    server: https://k8s.example:443\n"
                                                    "    insecure-skip-tls-verify: true\n",
                                                    "    client-certificate-data: " + std::string(kCertB64) +
                                                        "\n    client-key-data: " + kKeyB64 + "\n"));
  KubeConfigOptions o;
  o.kubeconfig = file;
  auto c = load_kube_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->tls.insecure_skip_verify);
  EXPECT_EQ(c->tls.client_cert_pem, "-----BEGIN CERTIFICATE-----\nfake\n");
  EXPECT_EQ(c->tls.client_key_pem, "-----BEGIN PRIVATE KEY-----\nkey\n");
  EXPECT_TRUE(c->bearer_token.empty());
  EXPECT_EQ(insecure_transport(*c),
            "TLS verification is off for https://k8s.example:443 (kubernetes: insecure-skip-tls-verify)");
}

TEST(KubeConfigText, InsecureTransportIsSaid) {
  const auto yaml = [](const std::string& cluster, const std::string& user) {
    return "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
           "clusters: [{name: k, cluster: {" +
           cluster + "}}]\nusers: [{name: u, user: {" + user + "}}]\n";
  };
  auto plain = parse_kube_config(yaml("server: 'http://admin:pw@k:8080'", "token: K8S-CLEARTEXT-TOKEN"), "/k");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(insecure_transport(*plain), "sending a bearer token over plain http to http://k:8080 (kubernetes)");
  auto tls = parse_kube_config(yaml("server: 'https://k:6443'", "token: t"), "/k");
  ASSERT_TRUE(tls) << tls.error().message;
  EXPECT_EQ(insecure_transport(*tls), "");  // verified TLS
  auto anonymous = parse_kube_config(yaml("server: 'http://k:8080'", ""), "/k");
  ASSERT_TRUE(anonymous) << anonymous.error().message;
  EXPECT_EQ(insecure_transport(*anonymous), "");  // nothing secret goes over it
}

TEST(KubeConfig, RelativeFilesResolveAgainstTheKubeconfigDirectory) {
  TempDir dir;
  test::write_file(dir / "conf/pki/ca.crt", "CA");
  test::write_file(dir / "conf/pki/client.crt", "CERT");
  test::write_file(dir / "conf/pki/client.key", "KEY");
  test::write_file(dir / "conf/token", "  tok-from-file\n");
  const auto file = test::write_file(dir / "conf/kc.yaml", config_with("    server: https://10.0.0.1:6443\n"
                                                                       "    certificate-authority: pki/ca.crt\n",
                                                                       "    client-certificate: pki/client.crt\n"
                                                                       "    client-key: pki/client.key\n"
                                                                       "    token: ignored\n"
                                                                       "    tokenFile: token\n"));
  KubeConfigOptions o;
  o.kubeconfig = file;
  auto c = load_kube_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tls.ca_file, (dir.path() / "conf/pki/ca.crt").string());
  EXPECT_EQ(c->tls.client_cert_file, (dir.path() / "conf/pki/client.crt").string());
  EXPECT_EQ(c->tls.client_key_file, (dir.path() / "conf/pki/client.key").string());
  EXPECT_EQ(c->bearer_token, "tok-from-file");  // tokenFile wins over token, trimmed
}

TEST(KubeConfig, MissingCaFileIsNamed) {
  TempDir dir;
  const auto file = test::write_file(dir / "kc.yaml", config_with("    server: https://10.0.0.1:6443\n"
                                                                  "    certificate-authority: /nonexistent/ca.crt\n",
                                                                  "    token: t\n"));
  KubeConfigOptions o;
  o.kubeconfig = file;
  auto c = load_kube_config(o);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr("certificate-authority /nonexistent/ca.crt"));
  EXPECT_THAT(c.error().message, HasSubstr("prod-cluster"));
}

TEST(KubeConfig, KubeconfigListMergesFirstNameWins) {
  TempDir dir;
  // a.yaml: current-context lab, its own lab-cluster; b.yaml: a second lab-cluster (loses), lab-user.
  const auto a = test::write_file(dir / "a.yaml",
                                  "current-context: lab\n"
                                  "contexts:\n- name: lab\n  context: {cluster: lab-cluster, user: lab-user}\n"
                                  "clusters:\n- name: lab-cluster\n  cluster: {server: 'https://a.example:6443'}\n");
  const auto b = test::write_file(dir / "b.yaml",
                                  "current-context: other\n"
                                  "clusters:\n- name: lab-cluster\n  cluster: {server: 'https://b.example:6443'}\n"
                                  "users:\n- name: lab-user\n  user: {token: from-b}\n");
  KubeConfigOptions o;
  o.env_kubeconfig = a + ":" + (dir.path() / "missing.yaml").string() + ":" + b;
  o.home = dir.path().string();  // no .kube/config there; must not matter
  auto c = load_kube_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://a.example:6443");
  EXPECT_EQ(c->bearer_token, "from-b");
  EXPECT_EQ(c->namespace_, "default");
  EXPECT_EQ(c->source, a + ", context lab");
}

TEST(KubeConfig, HomeConfigAndExplicitContext) {
  TempDir dir;
  test::write_file(dir / ".kube/config", config_with("    server: https://prod:6443\n", "    token: p\n") +
                                             "- name: lab-user\n  user: {token: l}\n"
                                             "- name: unused\n  user: {}\n");
  // lab-cluster is missing: asking for the lab context names it.
  KubeConfigOptions o;
  o.home = dir.path().string();
  auto prod = load_kube_config(o);
  ASSERT_TRUE(prod) << prod.error().message;
  EXPECT_EQ(prod->server, "https://prod:6443");
  o.context = "lab";
  auto lab = load_kube_config(o);
  ASSERT_FALSE(lab);
  EXPECT_THAT(lab.error().message, HasSubstr("cluster \"lab-cluster\""));
  o.context = "nowhere";
  auto none = load_kube_config(o);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("context \"nowhere\" not found"));
}

TEST(KubeConfig, MissingUserIsNamed) {
  TempDir dir;
  const auto file = test::write_file(dir / "kc.yaml",
                                     "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: ghost}\n"
                                     "clusters:\n- name: k\n  cluster: {server: 'https://k:6443'}\n");
  KubeConfigOptions o;
  o.kubeconfig = file;
  auto c = load_kube_config(o);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr("user \"ghost\""));
}

TEST(KubeConfig, ExecPluginIsRefusedWithTheAlternative) {
  TempDir dir;
  const auto file = test::write_file(dir / "kc.yaml",
                                     config_with("    server: https://eks.example\n",
                                                 "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                                                 "      command: aws\n      args: [eks, get-token]\n"));
  KubeConfigOptions o;
  o.kubeconfig = file;
  auto c = load_kube_config(o);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr("exec plugin (aws)"));
  EXPECT_THAT(c.error().message, HasSubstr("token"));
  EXPECT_THAT(c.error().message, HasSubstr("prod-user"));
}

TEST(KubeConfig, AuthProviderIsRefused) {
  TempDir dir;
  const auto file = test::write_file(
      dir / "kc.yaml", config_with("    server: https://gke.example\n", "    auth-provider:\n      name: gcp\n"));
  KubeConfigOptions o;
  o.kubeconfig = file;
  auto c = load_kube_config(o);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr("auth-provider plugin \"gcp\""));
}

TEST(KubeConfig, UnreadableAndMalformedFilesAreNamed) {
  TempDir dir;
  KubeConfigOptions o;
  o.kubeconfig = (dir.path() / "absent.yaml").string();
  auto absent = load_kube_config(o);
  ASSERT_FALSE(absent);
  EXPECT_THAT(absent.error().message, HasSubstr("cannot read " + o.kubeconfig));

  o.kubeconfig = test::write_file(dir / "bad.yaml", "clusters: [unclosed\n");
  auto bad = load_kube_config(o);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr(o.kubeconfig + ": not valid YAML"));

  o.kubeconfig = test::write_file(dir / "list.yaml", "- a\n- b\n");
  auto list = load_kube_config(o);
  ASSERT_FALSE(list);
  EXPECT_THAT(list.error().message, HasSubstr("not a kubeconfig"));

  o.kubeconfig =
      test::write_file(dir / "b64.yaml",
                       config_with("    server: https://k\n    certificate-authority-data: '@@@'\n", "    token: t\n"));
  auto b64 = load_kube_config(o);
  ASSERT_FALSE(b64);
  EXPECT_THAT(b64.error().message, HasSubstr("certificate-authority-data is not valid base64"));

  o.kubeconfig =
      test::write_file(dir / "noserver.yaml", config_with("    insecure-skip-tls-verify: true\n", "    token: t\n"));
  auto noserver = load_kube_config(o);
  ASSERT_FALSE(noserver);
  EXPECT_THAT(noserver.error().message, HasSubstr("no server"));
}

TEST(KubeConfig, InClusterFromServiceAccountDirectory) {
  TempDir dir;
  test::write_file(dir / "sa/token", "sa-token\n");
  test::write_file(dir / "sa/ca.crt", "CA");
  test::write_file(dir / "sa/namespace", "gpufleet");
  KubeConfigOptions o;
  o.home = dir.path().string();  // no ~/.kube/config: falls through to in-cluster
  o.service_account_dir = (dir.path() / "sa").string();
  o.service_host = "10.96.0.1";
  o.service_port = "443";
  auto c = load_kube_config(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->bearer_token, "sa-token");
  EXPECT_EQ(c->tls.ca_file, (dir.path() / "sa/ca.crt").string());
  EXPECT_EQ(c->namespace_, "gpufleet");
  EXPECT_EQ(c->source, "in-cluster");

  o.service_host = "fd00::1";  // IPv6 service address: bracketed
  auto v6 = load_kube_config(o);
  ASSERT_TRUE(v6) << v6.error().message;
  EXPECT_EQ(v6->server, "https://[fd00::1]:443");
}

TEST(KubeConfig, ForcedInClusterNeedsTheServiceHost) {
  TempDir dir;
  KubeConfigOptions o;
  o.in_cluster = true;
  o.service_account_dir = (dir.path() / "sa").string();
  auto c = load_kube_config(o);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr("KUBERNETES_SERVICE_HOST"));
  o.service_host = "10.96.0.1";
  auto no_token = load_kube_config(o);
  ASSERT_FALSE(no_token);
  EXPECT_THAT(no_token.error().message, HasSubstr((dir.path() / "sa/token").string()));
}

TEST(KubeConfig, NothingConfiguredSaysWhatWasTried) {
  TempDir dir;
  KubeConfigOptions o;
  o.home = dir.path().string();
  auto c = load_kube_config(o);
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, HasSubstr((dir.path() / ".kube/config").string()));
  EXPECT_THAT(c.error().message, HasSubstr("KUBERNETES_SERVICE_HOST"));
}

TEST(Base64, DecodesPaddedUnpaddedAndRejectsGarbage) {
  EXPECT_EQ(decode_base64("aGVsbG8="), "hello");
  EXPECT_EQ(decode_base64("aGVsbG8"), "hello");
  EXPECT_EQ(decode_base64("aGVs\nbG8h"), "hello!");
  EXPECT_EQ(decode_base64(""), "");
  EXPECT_FALSE(decode_base64("aGVsbG8=x"));
  EXPECT_FALSE(decode_base64("a"));
  EXPECT_FALSE(decode_base64("aGV*"));
}

}  // namespace
}  // namespace gf::cluster

namespace gf::cluster {
namespace {

TEST(KubeConfigText, ParsesWithoutTouchingFiles) {
  const std::string yaml =
      "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
      "clusters: [{name: k, cluster: {server: 'https://k:6443', certificate-authority: pki/ca.crt}}]\n"
      "users: [{name: u, user: {tokenFile: /nonexistent/token, client-certificate: u.crt, client-key: u.key}}]\n";
  auto c = parse_kube_config(yaml, "/etc/kube/config");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->tls.ca_file, "/etc/kube/pki/ca.crt");  // resolved, not checked
  EXPECT_EQ(c->tls.client_key_file, "/etc/kube/u.key");
  EXPECT_EQ(c->bearer_token, "");  // the token file is not read
  auto other = parse_kube_config(yaml, "/etc/kube/config", "d");
  ASSERT_FALSE(other);
  EXPECT_THAT(other.error().message, ::testing::HasSubstr("context \"d\" not found"));
}

}  // namespace
}  // namespace gf::cluster

namespace gf::cluster {
namespace {

TEST(KubeConfigText, ControlCharactersInErrorsAreEscaped) {
  auto c = parse_kube_config("current-context: \"evil\\e[2J\"\n", "/k");
  ASSERT_FALSE(c);
  EXPECT_THAT(c.error().message, ::testing::HasSubstr("context \"evil\\x1b[2J\" not found"));
  EXPECT_EQ(c.error().message.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace gf::cluster
