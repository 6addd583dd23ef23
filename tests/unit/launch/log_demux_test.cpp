#include "launch/log_demux.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace gf::launch {
namespace {

std::string frame(int stream, const std::string& payload) {
  std::string out;
  out.push_back(static_cast<char>(stream));
  out.append(3, '\0');
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xFF));
  return out + payload;
}

TEST(LogDemux, JoinsStdoutAndStderrFramesInOrder) {
  LogDemuxer d(LogFraming::Multiplexed, 1024);
  d.feed(frame(1, "out one\n") + frame(2, "err\n") + frame(1, "out two\n"));
  EXPECT_EQ(d.finish(), "out one\nerr\nout two\n");
}

TEST(LogDemux, SurvivesChunksSplitAnywhere) {
  const std::string stream = frame(1, "hello ") + frame(2, std::string(300, 'x')) + frame(1, "world");
  const std::string expected = "hello " + std::string(300, 'x') + "world";
  // Every chunk size from one byte up: headers and payloads are cut at every possible offset.
  for (std::size_t step = 1; step <= 16; ++step) {
    LogDemuxer d(LogFraming::Multiplexed, 4096);
    for (std::size_t i = 0; i < stream.size(); i += step) d.feed(std::string_view(stream).substr(i, step));
    EXPECT_EQ(d.finish(), expected) << "chunk size " << step;
  }
}

TEST(LogDemux, KeepsOnlyTheLastTailBytes) {
  LogDemuxer d(LogFraming::Multiplexed, 10);
  for (int i = 0; i < 1000; ++i) d.feed(frame(1, "0123456789"));
  d.feed(frame(2, "ABCDE"));
  EXPECT_EQ(d.finish(), "56789ABCDE");
}

TEST(LogDemux, SniffRecognisesFramesAndRawText) {
  LogDemuxer framed(LogFraming::Sniff, 100);
  framed.feed(frame(1, "framed"));
  EXPECT_EQ(framed.finish(), "framed");
  EXPECT_TRUE(framed.multiplexed());

  LogDemuxer raw(LogFraming::Sniff, 100);
  raw.feed("plain tty output\r\n");
  EXPECT_EQ(raw.finish(), "plain tty output\r\n");
  EXPECT_FALSE(raw.multiplexed());
}

TEST(LogDemux, SniffOfAStreamShorterThanAHeaderIsRaw) {
  LogDemuxer d(LogFraming::Sniff, 100);
  d.feed("ok\n");
  EXPECT_EQ(d.finish(), "ok\n");
}

TEST(LogDemux, RawFramingPassesHeaderLookalikesThrough) {
  const std::string bytes = frame(1, "x");
  LogDemuxer d(LogFraming::Raw, 100);
  d.feed(bytes);
  EXPECT_EQ(d.finish(), bytes);
}

TEST(LogDemux, ABrokenHeaderMidStreamKeepsTheRestVerbatim) {
  LogDemuxer d(LogFraming::Multiplexed, 100);
  d.feed(frame(1, "good\n") + "not a frame header");
  EXPECT_EQ(d.finish(), "good\nnot a frame header");
}

TEST(LogDemux, ZeroTailKeepsNothing) {
  LogDemuxer d(LogFraming::Multiplexed, 0);
  d.feed(frame(1, "anything"));
  EXPECT_EQ(d.finish(), "");
}

TEST(LogDemux, FramingFollowsContentTypeAndApiVersion) {
  EXPECT_EQ(framing_for("application/vnd.docker.multiplexed-stream", "1.44"), LogFraming::Multiplexed);
  EXPECT_EQ(framing_for("application/vnd.docker.raw-stream", "1.44"), LogFraming::Raw);
  // At 1.41 the engine says raw-stream for both kinds, so the body has to be looked at.
  EXPECT_EQ(framing_for("application/vnd.docker.raw-stream", "1.41"), LogFraming::Sniff);
  EXPECT_EQ(framing_for("", "1.44"), LogFraming::Sniff);
}

}  // namespace
}  // namespace gf::launch
