// Decoding of the pods/exec channel protocol (see exec_protocol.hpp).
#include "cluster/exec_protocol.hpp"

#include "platform/log.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

namespace gf::cluster {
namespace {

using json = nlohmann::json;

// A Status is a few hundred bytes; a longer error channel is not one.
constexpr std::size_t kMaxStatusBytes = 64 * 1024;

std::string string_member(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void append_bounded(std::string& to, std::string_view data, std::size_t max, bool& truncated) {
  const std::size_t room = to.size() < max ? max - to.size() : 0;
  if (data.size() > room) truncated = true;
  to.append(data.substr(0, room));
}

}  // namespace

Result<ExecStatus> parse_exec_status(std::string_view text) {
  const auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return make_error("the exec status is not JSON: " + platform::printable(text, 100));
  if (!doc.is_object()) return make_error("the exec status is not a JSON object");
  ExecStatus s;
  const std::string status = string_member(doc, "status");
  if (status == "Success") {
    s.success = true;
    s.exit_code = 0;
    return s;
  }
  if (status != "Failure")
    return make_error(
        fmt::format("the exec status says \"{}\" (expected Success or Failure)", platform::printable(status, 40)));
  s.reason = platform::printable(string_member(doc, "reason"), 100);
  s.message = platform::printable(string_member(doc, "message"));
  if (string_member(doc, "reason") == "NonZeroExitCode") {
    const auto details = doc.find("details");
    const json* causes = nullptr;
    if (details != doc.end() && details->is_object()) {
      const auto c = details->find("causes");
      if (c != details->end() && c->is_array()) causes = &*c;
    }
    if (causes != nullptr) {
      for (const auto& cause : *causes) {
        if (!cause.is_object() || string_member(cause, "reason") != "ExitCode") continue;
        const std::string m = string_member(cause, "message");
        int code = -1;
        const auto [end, ec] = std::from_chars(m.data(), m.data() + m.size(), code);
        if (ec != std::errc() || end != m.data() + m.size() || code < 0 || code > 255)
          return make_error("the exec status has an exit code that is not a number from 0 to 255: " +
                            platform::printable(m, 40));
        s.exit_code = code;
      }
    }
  }
  return s;
}

Result<void> ExecStreams::feed(std::string_view message) {
  if (message.empty()) return {};
  const auto channel = static_cast<unsigned char>(message.front());
  const std::string_view data = message.substr(1);
  switch (channel) {
    case kExecStdout: append_bounded(out_, data, max_bytes_, out_truncated_); return {};
    case kExecStderr: append_bounded(err_, data, max_bytes_, err_truncated_); return {};
    case kExecError:
      if (status_.size() + data.size() > kMaxStatusBytes)
        return make_error(fmt::format("the exec error channel sent more than {} bytes", kMaxStatusBytes));
      status_.append(data);
      return {};
    case kExecStdin:
    case kExecResize: return {};  // the client's channels: nothing for us in them
    case kExecClose:
      if (!v5_) return make_error("a control message (channel 255) under v4.channel.k8s.io");
      if (data.size() != 1)
        return make_error(
            fmt::format("a v5 close signal of {} byte(s) (expected the channel byte alone)", data.size()));
      if (static_cast<unsigned char>(data.front()) < 8) closed_ |= 1u << static_cast<unsigned char>(data.front());
      return {};
    default: return make_error(fmt::format("a message on unknown channel {}", static_cast<unsigned>(channel)));
  }
}

Result<ExecStatus> ExecStreams::finish() const {
  if (status_.empty()) return make_error("the exec stream ended without the command's status");
  return parse_exec_status(status_);
}

}  // namespace gf::cluster
