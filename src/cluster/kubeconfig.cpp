#include "cluster/kubeconfig.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "core/text.hpp"
#include "platform/url.hpp"

namespace gf::cluster {
namespace {

namespace fs = std::filesystem;

// A kubeconfig, token or certificate is small; a cap keeps a wrong path (/dev/zero, a huge log) from
// being read whole.
constexpr std::size_t kMaxFileBytes = 4u << 20;

// Thrown inside this file only, turned into an Error by load_kube_config.
struct ConfigError {
  std::string message;
};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError{fmt::format("cannot read {}: {}", path, std::strerror(errno))};
  std::string out;
  std::array<char, 8192> buf{};
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    out.append(buf.data(), static_cast<std::size_t>(in.gcount()));
    if (out.size() > kMaxFileBytes) throw ConfigError{fmt::format("{} is larger than {} bytes", path, kMaxFileBytes)};
  }
  if (in.bad()) throw ConfigError{fmt::format("cannot read {}: {}", path, std::strerror(errno))};
  return out;
}

// Error text carries names and paths from the kubeconfig, which its owner controls: control
// characters are shown as \xNN so that printing the error cannot drive the terminal.
std::string escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F)
      out += fmt::format("\\x{:02x}", u);
    else
      out.push_back(c);
  }
  return out;
}

// One named entry (cluster, context or user) and the file it came from: relative paths in it resolve
// against that file's directory, as kubectl does.
struct Entry {
  YAML::Node body;
  std::string file;
};

struct Merged {
  std::map<std::string, Entry> clusters, contexts, users;
  std::string current_context;
  std::string current_context_file;
};

// The scalar at `key` of a mapping, or nullopt when absent or null; a list or mapping there is an error.
std::optional<std::string> scalar(const YAML::Node& map, const char* key, const std::string& where) {
  const YAML::Node v = map[key];
  if (!v || v.IsNull()) return std::nullopt;
  if (!v.IsScalar()) throw ConfigError{fmt::format("{}: {} must be a string", where, key)};
  return v.Scalar();
}

bool flag(const YAML::Node& map, const char* key, const std::string& where) {
  const YAML::Node v = map[key];
  if (!v || v.IsNull()) return false;
  bool b = false;
  if (!v.IsScalar() || !YAML::convert<bool>::decode(v, b)) {
    throw ConfigError{fmt::format("{}: {} must be true or false", where, key)};
  }
  return b;
}

// Adds the named entries of list `section` ("clusters") whose inner key is `inner` ("cluster"); the
// first file that defines a name keeps it.
void merge_section(const YAML::Node& doc, const char* section, const char* inner, const std::string& file,
                   std::map<std::string, Entry>& into) {
  const YAML::Node list = doc[section];
  if (!list || list.IsNull()) return;
  if (!list.IsSequence()) throw ConfigError{fmt::format("{}: {} must be a list", file, section)};
  for (const auto& item : list) {
    if (!item.IsMap()) throw ConfigError{fmt::format("{}: every entry of {} must be a mapping", file, section)};
    const auto name = scalar(item, "name", file + " " + section);
    if (!name || name->empty()) throw ConfigError{fmt::format("{}: an entry of {} has no name", file, section)};
    YAML::Node body = item[inner];
    if (body && !body.IsNull() && !body.IsMap()) {
      throw ConfigError{fmt::format("{}: {} \"{}\" must be a mapping", file, inner, *name)};
    }
    into.try_emplace(*name, Entry{body ? body : YAML::Node(YAML::NodeType::Map), file});
  }
}

void merge_text(std::string_view text, const std::string& file, Merged& m) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError{fmt::format("{}: not valid YAML: {}", file, e.what())};
  }
  if (!doc || doc.IsNull()) return;  // an empty file is an empty config, as kubectl reads it
  if (!doc.IsMap()) throw ConfigError{fmt::format("{}: not a kubeconfig (the top level must be a mapping)", file)};
  merge_section(doc, "clusters", "cluster", file, m.clusters);
  merge_section(doc, "contexts", "context", file, m.contexts);
  merge_section(doc, "users", "user", file, m.users);
  if (m.current_context.empty()) {
    if (auto cc = scalar(doc, "current-context", file); cc && !cc->empty()) {
      m.current_context = *cc;
      m.current_context_file = file;
    }
  }
}

std::string resolve(const std::string& path, const std::string& relative_to_file) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(relative_to_file).parent_path() / path).lexically_normal().string();
}

// Files the chosen context names, checked (or read) once the context is known, so that choosing a
// context stays free of file access (parse_kube_config, the fuzzer).
struct FileRef {
  std::string path;
  std::string key;    // "certificate-authority"
  std::string where;  // "kc.yaml: cluster \"prod\""
};

struct Selected {
  KubeConfig config;
  std::vector<FileRef> must_be_readable;  // CA, client certificate and key files
  std::optional<FileRef> token_file;
};

// A certificate or key file must be readable now: curl would only say "problem with the local
// certificate" later, without the name.
void check_readable(const FileRef& f) {
  std::ifstream in(f.path, std::ios::binary);
  if (!in) throw ConfigError{fmt::format("{}: {} {}: {}", f.where, f.key, f.path, std::strerror(errno))};
}

KubeConfig finish(Selected s) {
  for (const auto& f : s.must_be_readable) check_readable(f);
  if (s.token_file) {
    s.config.bearer_token = std::string(core::trim(read_text_file(s.token_file->path)));
    if (s.config.bearer_token.empty()) {
      throw ConfigError{fmt::format("{}: tokenFile {} is empty", s.token_file->where, s.token_file->path)};
    }
  }
  return std::move(s.config);
}

std::string decoded(const std::string& b64, const char* key, const std::string& where) {
  auto pem = decode_base64(b64);
  if (!pem) throw ConfigError{fmt::format("{}: {} is not valid base64", where, key)};
  return *pem;
}

std::string normalized_server(std::string server, const std::string& where) {
  if (server.empty()) throw ConfigError{fmt::format("{}: no server", where)};
  if (!server.starts_with("https://") && !server.starts_with("http://")) {
    throw ConfigError{
        fmt::format("{}: server \"{}\" must start with https:// or http://", where, platform::url_for_display(server))};
  }
  while (server.size() > 8 && server.back() == '/') server.pop_back();
  return server;
}

// The cluster entry: the server and how to trust it.
void take_cluster(const Entry& entry, const std::string& name, Selected& sel) {
  KubeConfig& out = sel.config;
  const YAML::Node& c = entry.body;
  const std::string cl_where = fmt::format("{}: cluster \"{}\"", entry.file, name);
  out.server = normalized_server(scalar(c, "server", cl_where).value_or(""), cl_where);
  out.tls.insecure_skip_verify = flag(c, "insecure-skip-tls-verify", cl_where);
  if (auto data = scalar(c, "certificate-authority-data", cl_where); data && !data->empty()) {
    out.tls.ca_pem = decoded(*data, "certificate-authority-data", cl_where);
  } else if (auto file = scalar(c, "certificate-authority", cl_where); file && !file->empty()) {
    out.tls.ca_file = resolve(*file, entry.file);
    sel.must_be_readable.push_back({out.tls.ca_file, "certificate-authority", cl_where});
  }
}

// The plugins gpufleet does not run, named in the error that refuses them.
void refuse_plugins(const YAML::Node& u, const std::string& us_where) {
  if (u["exec"] && !u["exec"].IsNull()) {
    const auto cmd = u["exec"].IsMap() ? scalar(u["exec"], "command", us_where).value_or("?") : "?";
    throw ConfigError{
        fmt::format("{} authenticates with an exec plugin ({}), which gpufleet does not run; give it a token instead "
                    "(a service account token in the user's token or tokenFile) or a client certificate",
                    us_where, cmd)};
  }
  if (u["auth-provider"] && !u["auth-provider"].IsNull()) {
    const auto name = u["auth-provider"].IsMap() ? scalar(u["auth-provider"], "name", us_where).value_or("?") : "?";
    throw ConfigError{fmt::format(
        "{} authenticates with the auth-provider plugin \"{}\", which gpufleet does not support; give it a token "
        "instead (token or tokenFile) or a client certificate",
        us_where, name)};
  }
}

// The user entry: a bearer token (or its file) and a client certificate and key, inline or as files.
void take_user(const Entry& entry, const std::string& name, Selected& sel) {
  KubeConfig& out = sel.config;
  const YAML::Node& u = entry.body;
  const std::string us_where = fmt::format("{}: user \"{}\"", entry.file, name);
  refuse_plugins(u, us_where);
  // client-go: when both are set, the file's content wins over token.
  if (auto file = scalar(u, "tokenFile", us_where); file && !file->empty()) {
    sel.token_file = FileRef{resolve(*file, entry.file), "tokenFile", us_where};
  } else if (auto token = scalar(u, "token", us_where)) {
    out.bearer_token = std::string(core::trim(*token));
  }
  if (auto data = scalar(u, "client-certificate-data", us_where); data && !data->empty()) {
    out.tls.client_cert_pem = decoded(*data, "client-certificate-data", us_where);
  } else if (auto file = scalar(u, "client-certificate", us_where); file && !file->empty()) {
    out.tls.client_cert_file = resolve(*file, entry.file);
    sel.must_be_readable.push_back({out.tls.client_cert_file, "client-certificate", us_where});
  }
  if (auto data = scalar(u, "client-key-data", us_where); data && !data->empty()) {
    out.tls.client_key_pem = decoded(*data, "client-key-data", us_where);
  } else if (auto file = scalar(u, "client-key", us_where); file && !file->empty()) {
    out.tls.client_key_file = resolve(*file, entry.file);
    sel.must_be_readable.push_back({out.tls.client_key_file, "client-key", us_where});
  }
  const bool has_cert = !out.tls.client_cert_pem.empty() || !out.tls.client_cert_file.empty();
  const bool has_key = !out.tls.client_key_pem.empty() || !out.tls.client_key_file.empty();
  if (has_cert != has_key) {
    throw ConfigError{fmt::format("{} has a client {} without its {}", us_where, has_cert ? "certificate" : "key",
                                  has_cert ? "key" : "certificate")};
  }
  if (out.bearer_token.empty() && !sel.token_file && !has_cert && (u["username"] || u["password"])) {
    throw ConfigError{fmt::format(
        "{} uses basic authentication (username/password), which gpufleet does not support; give it a token "
        "or a client certificate",
        us_where)};
  }
}

Selected from_kubeconfig(const Merged& m, const std::string& files, const std::string& wanted_context) {
  const std::string context_name = wanted_context.empty() ? m.current_context : wanted_context;
  if (context_name.empty()) {
    throw ConfigError{fmt::format("{}: no current-context (choose one with --context)", files)};
  }
  const auto ctx = m.contexts.find(context_name);
  if (ctx == m.contexts.end()) throw ConfigError{fmt::format("{}: context \"{}\" not found", files, context_name)};
  const std::string ctx_where = fmt::format("{}: context \"{}\"", ctx->second.file, context_name);
  const auto cluster_name = scalar(ctx->second.body, "cluster", ctx_where).value_or("");
  const auto user_name = scalar(ctx->second.body, "user", ctx_where).value_or("");
  if (cluster_name.empty()) throw ConfigError{ctx_where + " names no cluster"};

  Selected sel;
  sel.config.source = fmt::format("{}, context {}", ctx->second.file, context_name);
  sel.config.namespace_ = scalar(ctx->second.body, "namespace", ctx_where).value_or("");
  if (sel.config.namespace_.empty()) sel.config.namespace_ = "default";

  const auto cl = m.clusters.find(cluster_name);
  if (cl == m.clusters.end()) {
    throw ConfigError{fmt::format("{} names cluster \"{}\", which {} does not define", ctx_where, cluster_name, files)};
  }
  take_cluster(cl->second, cluster_name, sel);

  if (user_name.empty()) return sel;  // a context without a user: no credentials (rare, but valid)
  const auto us = m.users.find(user_name);
  if (us == m.users.end()) {
    throw ConfigError{fmt::format("{} names user \"{}\", which {} does not define", ctx_where, user_name, files)};
  }
  take_user(us->second, user_name, sel);
  return sel;
}

KubeConfig from_service_account(const KubeConfigOptions& o) {
  if (o.service_host.empty()) {
    throw ConfigError{"in-cluster configuration needs KUBERNETES_SERVICE_HOST, which is not set (not in a pod?)"};
  }
  const fs::path dir(o.service_account_dir);
  KubeConfig out;
  const std::string host = o.service_host.find(':') != std::string::npos ? "[" + o.service_host + "]" : o.service_host;
  out.server = fmt::format("https://{}:{}", host, o.service_port.empty() ? "443" : o.service_port);
  out.bearer_token = std::string(core::trim(read_text_file((dir / "token").string())));
  if (out.bearer_token.empty()) throw ConfigError{fmt::format("{} is empty", (dir / "token").string())};
  out.tls.ca_file = (dir / "ca.crt").string();
  check_readable({out.tls.ca_file, "service account CA", "in-cluster"});
  std::error_code ec;
  if (fs::exists(dir / "namespace", ec))
    out.namespace_ = std::string(core::trim(read_text_file((dir / "namespace").string())));
  if (out.namespace_.empty()) out.namespace_ = "default";
  out.source = "in-cluster";
  return out;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ':')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ":") + s;
  return out;
}

KubeConfig load(const KubeConfigOptions& o) {
  if (o.in_cluster) return from_service_account(o);
  std::vector<std::string> files;
  if (!o.kubeconfig.empty()) {
    files.push_back(o.kubeconfig);  // named explicitly: it must exist (read_text_file says so)
  } else if (!o.env_kubeconfig.empty()) {
    // As kubectl: files of $KUBECONFIG that do not exist are skipped.
    const auto listed = split_list(o.env_kubeconfig);
    std::error_code ec;
    for (const auto& f : listed) {
      if (fs::exists(f, ec)) files.push_back(f);
    }
    if (files.empty()) {
      if (!o.service_host.empty()) return from_service_account(o);
      throw ConfigError{fmt::format("none of the files in $KUBECONFIG exists ({})", o.env_kubeconfig)};
    }
  } else {
    const std::string home_config = o.home.empty() ? std::string() : (fs::path(o.home) / ".kube" / "config").string();
    std::error_code ec;
    if (!home_config.empty() && fs::exists(home_config, ec)) {
      files.push_back(home_config);
    } else if (!o.service_host.empty()) {
      return from_service_account(o);
    } else {
      throw ConfigError{
          fmt::format("no Kubernetes configuration: no --kubeconfig, $KUBECONFIG is not set, {} does not exist, and "
                      "KUBERNETES_SERVICE_HOST is not set (not in a pod)",
                      home_config.empty() ? std::string("~/.kube/config ($HOME unset)") : home_config)};
    }
  }
  Merged merged;
  for (const auto& f : files) merge_text(read_text_file(f), f, merged);
  return finish(from_kubeconfig(merged, join(files), o.context));
}

}  // namespace

Result<KubeConfig> load_kube_config(const KubeConfigOptions& options) {
  try {
    return load(options);
  } catch (const ConfigError& e) {
    return make_error(escaped(e.message));
  } catch (const YAML::Exception& e) {
    return make_error(escaped(fmt::format("kubeconfig: {}", e.what())));
  }
}

Result<KubeConfig> parse_kube_config(std::string_view yaml, const std::string& file_name, const std::string& context) {
  try {
    Merged merged;
    merge_text(yaml, file_name, merged);
    return from_kubeconfig(merged, file_name, context).config;
  } catch (const ConfigError& e) {
    return make_error(escaped(e.message));
  } catch (const YAML::Exception& e) {
    return make_error(escaped(fmt::format("{}: {}", file_name, e.what())));
  }
}

std::optional<std::string> decode_base64(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  std::uint32_t acc = 0;
  int bits = 0, count = 0, pad = 0;
  for (const char ch : text) {
    if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    int v = -1;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '+')
      v = 62;
    else if (ch == '/')
      v = 63;
    else if (ch == '=') {
      ++pad;
      ++count;
      continue;
    }
    if (v < 0 || pad > 0) return std::nullopt;  // a foreign character, or data after padding
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    ++count;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  // Whole quanta when padded; without padding, a last quantum of 2 or 3 characters is fine, 1 is not.
  if (pad > 2 || (pad > 0 && count % 4 != 0) || count % 4 == 1) return std::nullopt;
  return out;
}

std::string insecure_transport(const KubeConfig& c) {
  const std::string shown = platform::url_for_display(c.server);
  const bool plain = platform::url_is_plain_http(c.server);
  if (plain && !c.bearer_token.empty()) return "sending a bearer token over plain http to " + shown + " (kubernetes)";
  if (!plain && c.tls.insecure_skip_verify)
    return "TLS verification is off for " + shown + " (kubernetes: insecure-skip-tls-verify)";
  return {};
}

}  // namespace gf::cluster
