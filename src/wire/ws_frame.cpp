#include "wire/ws_frame.hpp"

#include <zlib.h>

#include <array>
#include <cctype>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace gf::wire::ws {
namespace {

// RFC 6455's close codes used here.
constexpr std::uint16_t kProtocolError = 1002;
constexpr std::uint16_t kInvalidData = 1007;
constexpr std::uint16_t kTooBig = 1009;
constexpr std::uint16_t kNoStatus = 1005;

// The four bytes a sync flush ends with, which a permessage-deflate sender removes and a reader adds back.
constexpr std::array<char, 4> kTail{0, 0, static_cast<char>(0xff), static_cast<char>(0xff)};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The next item of `s` up to `sep` (removed from s).
std::string_view take(std::string_view& s, char sep) {
  const auto at = s.find(sep);
  const auto item = s.substr(0, at);
  s = at == std::string_view::npos ? std::string_view() : s.substr(at + 1);
  return trim(item);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// A window-bits value (8..15), bare or quoted; 0 when invalid.
int window_bits(std::string_view v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (v.empty() || v.size() > 2) return 0;
  int n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n >= 8 && n <= 15 ? n : 0;
}

// Whether one offer's parameters (after the name) can be honoured with both sides' no-context-takeover.
// `*smwb`: whether the offer named server_max_window_bits (=15), which the response must then echo.
bool acceptable(std::string_view params, bool* smwb) {
  bool seen_snct = false, seen_cnct = false, seen_smwb = false, seen_cmwb = false;
  while (!params.empty()) {
    std::string_view param = take(params, ';');
    const auto eq = param.find('=');
    const std::string_view name = trim(param.substr(0, eq));
    const std::optional<std::string_view> value =
        eq == std::string_view::npos ? std::nullopt : std::optional(trim(param.substr(eq + 1)));
    auto once = [](bool& seen) { return !std::exchange(seen, true); };
    if (iequals(name, "server_no_context_takeover") || iequals(name, "client_no_context_takeover")) {
      if (value || !once(iequals(name, "server_no_context_takeover") ? seen_snct : seen_cnct)) return false;
    } else if (iequals(name, "server_max_window_bits")) {
      // A smaller window than the one every client shares: declined (each message is deflated once).
      if (!once(seen_smwb) || !value || window_bits(*value) != 15) return false;
    } else if (iequals(name, "client_max_window_bits")) {
      if (!once(seen_cmwb) || (value && window_bits(*value) == 0)) return false;
    } else {
      return false;
    }
  }
  *smwb = seen_smwb;
  return true;
}

// One raw inflater per thread, reset for each message (both sides' no-context-takeover): no
// connection keeps a window of its own.
class Inflater {
 public:
  Inflater() {
    if (inflateInit2(&z_, -15) != Z_OK) throw std::runtime_error("zlib: inflateInit2 failed");
  }
  ~Inflater() { inflateEnd(&z_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  std::optional<std::string> run(std::string_view payload, std::size_t max_size) {
    inflateReset(&z_);
    std::string in(payload);
    in.append(kTail.data(), kTail.size());
    z_.next_in = reinterpret_cast<Bytef*>(in.data());
    z_.avail_in = static_cast<uInt>(in.size());
    std::string out;
    std::array<char, 16384> chunk{};
    for (;;) {
      z_.next_out = reinterpret_cast<Bytef*>(chunk.data());
      z_.avail_out = static_cast<uInt>(chunk.size());
      const int rc = inflate(&z_, Z_SYNC_FLUSH);
      const std::size_t got = chunk.size() - z_.avail_out;
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return std::nullopt;
      if (out.size() + got > max_size) return std::nullopt;
      out.append(chunk.data(), got);
      if (rc == Z_STREAM_END || (z_.avail_in == 0 && z_.avail_out > 0)) return out;
      if (rc == Z_BUF_ERROR && got == 0) return std::nullopt;  // no progress: truncated input
    }
  }

 private:
  z_stream z_{};
};

}  // namespace

std::optional<std::string> negotiate_deflate(std::string_view offers) {
  if (offers.size() > 4096) return std::nullopt;
  while (!offers.empty()) {
    std::string_view offer = take(offers, ',');
    const std::string_view name = take(offer, ';');
    bool smwb = false;
    if (iequals(name, "permessage-deflate") && acceptable(offer, &smwb)) {
      // RFC 7692 7.1.2.1: a server_max_window_bits offered is echoed (15: the window used).
      return std::string("permessage-deflate; server_no_context_takeover; client_no_context_takeover") +
             (smwb ? "; server_max_window_bits=15" : "");
    }
  }
  return std::nullopt;
}

std::string frame_header(Opcode op, std::size_t size, bool compressed) {
  std::string h;
  h.reserve(10);
  h += static_cast<char>(0x80 | (compressed ? 0x40 : 0) | static_cast<int>(op));
  if (size < 126) {
    h += static_cast<char>(size);
  } else if (size <= 0xffff) {
    h += static_cast<char>(126);
    h += static_cast<char>(size >> 8);
    h += static_cast<char>(size & 0xff);
  } else {
    h += static_cast<char>(127);
    for (int shift = 56; shift >= 0; shift -= 8)
      h += static_cast<char>((static_cast<std::uint64_t>(size) >> shift) & 0xff);
  }
  return h;
}

std::string deflate_message(std::string_view text, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib: deflateInit2 failed");
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())) + 16, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));  // zlib's API is not const
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_SYNC_FLUSH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  if (rc != Z_OK || z.avail_in != 0 || out.size() < kTail.size()) throw std::runtime_error("zlib: deflate failed");
  out.resize(out.size() - kTail.size());  // a sync flush always ends with the empty stored block's 00 00 ff ff
  return out;
}

std::string deflated_text_frame(std::string_view text, int level) {
  const std::string payload = deflate_message(text, level);
  std::string frame = frame_header(Opcode::Text, payload.size(), true);
  frame += payload;
  return frame;
}

std::optional<std::string> inflate_message(std::string_view payload, std::size_t max_size) {
  thread_local Inflater inflater;
  return inflater.run(payload, max_size);
}

namespace {

// A shared_text(): the text, and its deflated frame once made. Reached from the text's shared_ptr through
// its deleter, so any holder of the text finds it (and it lives exactly as long as the text).
struct SharedText {
  std::string text;
  mutable std::once_flag once;
  mutable std::string frame;
};
struct SharedTextDeleter {
  SharedText* owner;
  void operator()(const std::string*) const noexcept { delete owner; }
};

}  // namespace

std::shared_ptr<const std::string> shared_text(std::string text) {
  auto* owner = new SharedText{std::move(text), {}, {}};
  return {&owner->text, SharedTextDeleter{owner}};  // the deleter runs if this throws
}

std::shared_ptr<const std::string> shared_deflated_frame(const std::shared_ptr<const std::string>& text) {
  const auto* d = std::get_deleter<SharedTextDeleter>(text);
  if (d == nullptr || text.get() != &d->owner->text) return nullptr;
  const SharedText& s = *d->owner;
  std::call_once(s.once, [&s] { s.frame = deflated_text_frame(s.text); });
  return {text, &s.frame};  // aliases the text's ownership
}

FrameReader::Event FrameReader::fail(std::uint16_t code, std::string reason) {
  failed_ = true;
  message_ = std::string();
  Event e;
  e.kind = Kind::Error;
  e.close_code = code;
  e.reason = std::move(reason);
  return e;
}

FrameReader::Event FrameReader::next(std::string_view all, std::size_t& pos) {
  for (;;) {
    if (failed_) return fail(kProtocolError, "after an error");
    const std::string_view in = pos < all.size() ? all.substr(pos) : std::string_view();
    if (in.size() < 2) return {};
    const auto b0 = static_cast<std::uint8_t>(in[0]);
    const auto b1 = static_cast<std::uint8_t>(in[1]);
    const bool fin = (b0 & 0x80) != 0, rsv1 = (b0 & 0x40) != 0;
    const auto op = static_cast<std::uint8_t>(b0 & 0x0f);
    if ((b0 & 0x30) != 0) return fail(kProtocolError, "reserved bits set");
    if ((b1 & 0x80) == 0) return fail(kProtocolError, "an unmasked client frame");
    std::size_t header = 2;
    std::uint64_t len = b1 & 0x7f;
    if (len == 126) {
      if (in.size() < 4) return {};
      len = (std::uint64_t{static_cast<std::uint8_t>(in[2])} << 8) | static_cast<std::uint8_t>(in[3]);
      if (len < 126) return fail(kProtocolError, "a length not in its shortest form");
      header = 4;
    } else if (len == 127) {
      if (in.size() < 10) return {};
      len = 0;
      for (int i = 2; i < 10; ++i) len = (len << 8) | static_cast<std::uint8_t>(in[static_cast<std::size_t>(i)]);
      if (len <= 0xffff || (len >> 63) != 0) return fail(kProtocolError, "a length not in its shortest form");
      header = 10;
    }
    const bool control = (op & 0x8) != 0;
    if (control) {
      if (op != 8 && op != 9 && op != 10) return fail(kProtocolError, "an unknown opcode");
      if (!fin || len > 125 || rsv1) return fail(kProtocolError, "a bad control frame");
    } else {
      if (op > 2) return fail(kProtocolError, "an unknown opcode");
      if ((op == 0) != in_message_) return fail(kProtocolError, "a fragment out of sequence");
      if (rsv1 && (!deflate_ || op == 0)) return fail(kProtocolError, "RSV1 not allowed here");
      if (len > max_message_ || message_.size() + len > max_message_) return fail(kTooBig, "message too big");
    }
    const std::size_t mask_at = header;
    header += 4;
    if (in.size() < header + len) return {};
    std::string payload(in.substr(header, static_cast<std::size_t>(len)));
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(payload[i] ^ in[mask_at + i % 4]);
    pos += header + static_cast<std::size_t>(len);

    if (control) {
      Event e;
      e.payload = std::move(payload);
      if (op == 9) {
        e.kind = Kind::Ping;
      } else if (op == 10) {
        e.kind = Kind::Pong;
      } else {
        e.kind = Kind::Close;
        e.close_code = kNoStatus;
        if (e.payload.size() == 1) return fail(kProtocolError, "a close frame of one byte");
        if (e.payload.size() >= 2) {
          const auto code = static_cast<std::uint16_t>((static_cast<std::uint8_t>(e.payload[0]) << 8) |
                                                       static_cast<std::uint8_t>(e.payload[1]));
          const bool valid =
              (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
          if (!valid) return fail(kProtocolError, "an invalid close code");
          if (!valid_utf8(std::string_view(e.payload).substr(2))) return fail(kInvalidData, "a close reason not UTF-8");
          e.close_code = code;
        }
      }
      return e;
    }
    if (op != 0) {
      in_message_ = true;
      compressed_ = rsv1;
      binary_ = op == 2;
    }
    message_ += payload;
    if (!fin) continue;
    in_message_ = false;
    Event e;
    e.kind = Kind::Message;
    e.binary = binary_;
    if (compressed_) {
      auto inflated = inflate_message(message_, max_message_);
      if (!inflated) return fail(kTooBig, "a compressed message too big or not valid");
      e.payload = std::move(*inflated);
    } else {
      e.payload = std::move(message_);
    }
    message_ = std::string();
    if (!e.binary && !valid_utf8(e.payload)) return fail(kInvalidData, "a text message not UTF-8");
    return e;
  }
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<std::uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int n = 0;
    std::uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (s.size() - i <= static_cast<std::size_t>(n)) return false;  // truncated
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<std::uint8_t>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<std::size_t>(n) + 1;
  }
  return true;
}

}  // namespace gf::wire::ws
