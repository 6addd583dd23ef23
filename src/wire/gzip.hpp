#pragma once
// gzip (RFC 1952) for documents rendered once and served many times: a whole document, or a document
// whose first part is rendered once per reading and whose last few lines change with every request
// (/metrics: the GPUs' series, then the agent's own). The first part is deflated once, up to a full
// flush (byte-aligned, history reset, no final block); each request appends its own lines as stored
// blocks and the trailer, whose CRC-32 is combined from the two parts' without reading the first
// again. Any gzip reader (Go's, zlib's, a browser's) reads the result as one member.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gf::wire {

// The level of what is compressed once per reading. Measured on 8 GPUs' /metrics (56.8 kB) and
// gpu-metrics (17.1 kB), bench/RESULTS.md (issue 24, goal 1): level 6 is within 1 % of level 9 in bytes
// at a fraction of its time; level 1 is ~10–20 % larger.
inline constexpr int kGzipLevel = 6;

// A complete gzip member of `text`.
std::string gzip(std::string_view text, int level = kGzipLevel);

// The start of a member: the gzip header and `text` deflated up to a full flush, with what the end
// needs to know of it.
struct GzipHead {
  std::string bytes;
  std::uint32_t crc = 0;   // CRC-32 of text
  std::uint64_t size = 0;  // text's length
};
GzipHead gzip_head(std::string_view text, int level = kGzipLevel);

// The rest of the member begun by `head`: `tail` in stored (uncompressed) deflate blocks, the last one
// final, then the trailer for head's text followed by tail. Costs a CRC-32 of tail, nothing more.
std::string gzip_tail(const GzipHead& head, std::string_view tail);

// What a gzip reader gives back from `gz` (one or more members); empty on bad data or beyond max_size
// (for tests and tools; the agent never inflates what a client sends).
std::string gunzip(std::string_view gz, std::size_t max_size = 64u << 20);

}  // namespace gf::wire
