#include "wire/gzip.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>

#include <sys/mman.h>

namespace gf::wire {
namespace {

// The 10 bytes every member begins with: magic, deflate, no flags, no time, no extra flags, Unix.
constexpr std::array<unsigned char, 10> kHeader{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};

// zlib's memory for a deflate stream (~270 KiB at windowBits 15, memLevel 8: window, hash chains,
// pending buffer) in pages of its own, unmapped when the stream ends. From malloc, those blocks stayed
// in the heap after deflateEnd, resident and counted in the agent's RSS (~0.17 MiB: a malloc_trim after
// the first gzip gave that much back; bench/RESULTS.md, issue 24 goal 1). A stream is made once per
// reading and kind, not per request; the mappings cost ~1 % of its deflate.
constexpr std::size_t kMapHeader = alignof(std::max_align_t);  // the mapping's length, then the block

voidpf map_alloc(voidpf, uInt items, uInt size) {
  const std::size_t n = static_cast<std::size_t>(items) * size + kMapHeader;
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Z_NULL;
  *static_cast<std::size_t*>(p) = n;
  return static_cast<char*>(p) + kMapHeader;
}

void map_free(voidpf, voidpf block) {
  char* p = static_cast<char*>(block) - kMapHeader;
  ::munmap(p, *reinterpret_cast<std::size_t*>(p));
}

// A deflate stream (raw when window_bits < 0) with its memory; ended on every path.
class Deflater {
 public:
  Deflater(int level, int window_bits, int mem_level) {
    z_.zalloc = map_alloc;
    z_.zfree = map_free;
    if (deflateInit2(&z_, level, Z_DEFLATED, window_bits, mem_level, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("zlib: deflateInit2 failed");
  }
  ~Deflater() { deflateEnd(&z_); }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;

  // Appends `in` deflated to `out`, ending with `flush` (Z_FINISH or Z_FULL_FLUSH).
  void run(std::string_view in, std::string& out, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));  // zlib's API is not const
    z_.avail_in = static_cast<uInt>(in.size());
    const std::size_t bound = deflateBound(&z_, static_cast<uLong>(in.size())) + 16;
    for (;;) {
      const std::size_t at = out.size();
      out.resize(at + bound);
      z_.next_out = reinterpret_cast<Bytef*>(out.data() + at);
      z_.avail_out = static_cast<uInt>(bound);
      const int rc = deflate(&z_, flush);
      out.resize(out.size() - z_.avail_out);
      if (rc == Z_STREAM_END || (flush != Z_FINISH && z_.avail_out != 0 && z_.avail_in == 0)) return;
      if (rc != Z_OK && rc != Z_BUF_ERROR) throw std::runtime_error("zlib: deflate failed");
    }
  }

 private:
  z_stream z_{};
};

void put_le32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t crc_of(std::string_view s) {
  return static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

}  // namespace

std::string gzip(std::string_view text, int level) {
  std::string out(kHeader.begin(), kHeader.end());
  Deflater(level, -15, 8).run(text, out, Z_FINISH);
  put_le32(out, crc_of(text));
  put_le32(out, static_cast<std::uint32_t>(text.size()));
  return out;
}

GzipHead gzip_head(std::string_view text, int level) {
  GzipHead h;
  h.bytes.assign(kHeader.begin(), kHeader.end());
  Deflater(level, -15, 8).run(text, h.bytes, Z_FULL_FLUSH);
  h.crc = crc_of(text);
  h.size = text.size();
  h.bytes.shrink_to_fit();
  return h;
}

std::string gzip_tail(const GzipHead& head, std::string_view tail) {
  // Stored blocks (RFC 1951 3.2.4): the head ends byte-aligned, so each block is a byte with BFINAL
  // (BTYPE 00), LEN and its complement, then the bytes as they are. Compressing the ~2 kB of agent
  // series per request cost more CPU than the whole rest of the request (~20 µs against ~1 kB saved);
  // the CRC-32 is all the work left.
  std::string out;
  out.reserve(tail.size() + 5 * (tail.size() / 65535 + 1) + 8);
  std::size_t at = 0;
  do {
    const std::size_t n = std::min<std::size_t>(tail.size() - at, 65535);
    const bool last = at + n == tail.size();
    out.push_back(static_cast<char>(last ? 1 : 0));
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(~n & 0xff));
    out.push_back(static_cast<char>((~n >> 8) & 0xff));
    out.append(tail.substr(at, n));
    at += n;
  } while (at < tail.size());
  const auto crc = crc32_combine(head.crc, crc_of(tail), static_cast<z_off_t>(tail.size()));
  put_le32(out, static_cast<std::uint32_t>(crc));
  put_le32(out, static_cast<std::uint32_t>(head.size + tail.size()));
  return out;
}

std::string gunzip(std::string_view gz, std::size_t max_size) {
  std::string out;
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return {};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::array<char, 16384> buf{};
  int rc = Z_OK;
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buf.data());
    z.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - z.avail_out);
    if (out.size() > max_size) break;
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      inflateReset(&z);  // another member follows
      continue;
    }
    if (rc != Z_OK) break;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END || z.avail_in != 0 || out.size() > max_size) return {};
  return out;
}

}  // namespace gf::wire
