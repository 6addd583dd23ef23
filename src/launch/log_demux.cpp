#include "launch/log_demux.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "launch/api_version.hpp"

namespace gf::launch {
namespace {

constexpr std::size_t kHeaderBytes = 8;

bool looks_like_header(std::string_view h) {
  return h.size() >= 4 && static_cast<unsigned char>(h[0]) <= 2 && h[1] == '\0' && h[2] == '\0' && h[3] == '\0';
}

std::uint32_t payload_size(std::string_view h) {
  const auto b = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(h[i])); };
  return (b(4) << 24) | (b(5) << 16) | (b(6) << 8) | b(7);
}

}  // namespace

LogFraming framing_for(std::string_view content_type, std::string_view api_version) {
  if (content_type.find("multiplexed-stream") != std::string_view::npos) return LogFraming::Multiplexed;
  // From 1.42 the engine labels multiplexed output, so an unlabelled body there is a TTY's raw bytes.
  const bool labelled = parse_api_version(api_version).value_or(std::pair{0, 0}) >= std::pair{1, 42};
  if (labelled && content_type.find("raw-stream") != std::string_view::npos) return LogFraming::Raw;
  return LogFraming::Sniff;
}

LogDemuxer::LogDemuxer(LogFraming framing, std::size_t tail_bytes) : framing_(framing), tail_bytes_(tail_bytes) {}

void LogDemuxer::keep(std::string_view text) {
  if (tail_bytes_ == 0) return;
  tail_.append(text);
  // Trim only when twice the tail has built up, so the erase cost is amortised over the bytes appended.
  if (tail_.size() > 2 * tail_bytes_) tail_.erase(0, tail_.size() - tail_bytes_);
}

void LogDemuxer::feed(std::string_view chunk) {
  if (framing_ == LogFraming::Sniff) {
    pending_.append(chunk);
    if (pending_.size() < kHeaderBytes) return;
    framing_ = looks_like_header(pending_) ? LogFraming::Multiplexed : LogFraming::Raw;
    std::string buffered;
    buffered.swap(pending_);
    feed(buffered);
    return;
  }
  if (framing_ == LogFraming::Raw) {
    keep(chunk);
    return;
  }
  feed_multiplexed(chunk);
}

void LogDemuxer::feed_multiplexed(std::string_view chunk) {
  while (!chunk.empty()) {
    if (payload_left_ > 0) {
      const auto n = std::min(payload_left_, chunk.size());
      keep(chunk.substr(0, n));
      payload_left_ -= n;
      chunk.remove_prefix(n);
      continue;
    }
    const auto need = kHeaderBytes - pending_.size();
    pending_.append(chunk.substr(0, need));
    chunk.remove_prefix(std::min(need, chunk.size()));
    if (pending_.size() < kHeaderBytes) return;
    if (!looks_like_header(pending_)) {
      // Not a frame after all (a TTY stream that happened to start like one): keep the rest verbatim
      // rather than drop or garble output.
      framing_ = LogFraming::Raw;
      keep(pending_);
      pending_.clear();
      keep(chunk);
      return;
    }
    payload_left_ = payload_size(pending_);
    pending_.clear();
  }
}

std::string LogDemuxer::finish() {
  // A stream shorter than one header was never multiplexed; a dangling partial header is dropped.
  if (framing_ == LogFraming::Sniff) {
    framing_ = LogFraming::Raw;
    keep(pending_);
    pending_.clear();
  }
  if (tail_.size() > tail_bytes_) tail_.erase(0, tail_.size() - tail_bytes_);
  return std::move(tail_);
}

}  // namespace gf::launch
