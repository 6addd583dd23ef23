// wire/ws_frame: permessage-deflate's negotiation, the server's frames, and the reader of a client's
// frames (masks, fragments, control frames, limits, inflation).
#include "wire/ws_frame.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gf::wire::ws {
namespace {

// A client frame: masked with a fixed key.
std::string client_frame(std::uint8_t first_byte, const std::string& payload, bool masked = true) {
  std::string f;
  f += static_cast<char>(first_byte);
  const std::size_t n = payload.size();
  const char mask_bit = masked ? static_cast<char>(0x80) : 0;
  if (n < 126) {
    f += static_cast<char>(mask_bit | static_cast<char>(n));
  } else if (n <= 0xffff) {
    f += static_cast<char>(mask_bit | 126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  } else {
    f += static_cast<char>(mask_bit | 127);
    for (int s = 56; s >= 0; s -= 8) f += static_cast<char>((static_cast<std::uint64_t>(n) >> s) & 0xff);
  }
  const std::string key = "\x12\x34\x56\x78";
  if (masked) f += key;
  for (std::size_t i = 0; i < n; ++i) f += masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i];
  return f;
}

std::string update_like(std::size_t gpus) {
  std::string s = R"({"event":"gpu_status_update","data":[)";
  for (std::size_t i = 0; i < gpus; ++i)
    s += R"({"index":)" + std::to_string(i) + R"(,"name":"NVIDIA H100 80GB HBM3","utilization":)" +
         std::to_string(i * 13 % 100) + R"(,"memory_used":)" + std::to_string(i * 1048576) + "},";
  s.back() = ']';
  return s + "}";
}

TEST(WsDeflate, NegotiatesBothNoContextTakeovers) {
  const std::string answer = "permessage-deflate; server_no_context_takeover; client_no_context_takeover";
  EXPECT_EQ(negotiate_deflate("permessage-deflate; client_max_window_bits"), answer);  // Chromium's offer
  EXPECT_EQ(negotiate_deflate("permessage-deflate"), answer);
  // RFC 7692 7.1.2.1: server_max_window_bits offered is echoed.
  EXPECT_EQ(negotiate_deflate("Permessage-Deflate ; client_no_context_takeover ; server_max_window_bits=15"),
            answer + "; server_max_window_bits=15");
  EXPECT_EQ(negotiate_deflate("x-webkit-deflate-frame, permessage-deflate; client_max_window_bits=\"10\""), answer);
  // A smaller server window (each message is deflated once for all) is declined; the next offer may do.
  EXPECT_FALSE(negotiate_deflate("permessage-deflate; server_max_window_bits=10"));
  EXPECT_EQ(negotiate_deflate("permessage-deflate; server_max_window_bits=10, permessage-deflate"), answer);
  EXPECT_FALSE(negotiate_deflate("permessage-deflate; client_no_context_takeover; client_no_context_takeover"));
  EXPECT_FALSE(negotiate_deflate("permessage-deflate; unknown_param"));
  EXPECT_FALSE(negotiate_deflate("permessage-deflate; server_no_context_takeover=1"));
  EXPECT_FALSE(negotiate_deflate("permessage-deflate; client_max_window_bits=16"));
  EXPECT_FALSE(negotiate_deflate(""));
  EXPECT_FALSE(negotiate_deflate("x-webkit-deflate-frame"));
  EXPECT_FALSE(negotiate_deflate(std::string(5000, ' ') + "permessage-deflate"));
}

TEST(WsDeflate, ServerFrameHeaders) {
  EXPECT_EQ(frame_header(Opcode::Text, 5), std::string("\x81\x05", 2));
  EXPECT_EQ(frame_header(Opcode::Text, 5, true), std::string("\xc1\x05", 2));
  EXPECT_EQ(frame_header(Opcode::Pong, 0), std::string("\x8a\x00", 2));
  EXPECT_EQ(frame_header(Opcode::Text, 300), std::string("\x81\x7e\x01\x2c", 4));
  const auto big = frame_header(Opcode::Binary, 70000);
  ASSERT_EQ(big.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(big[1]), 127);
  EXPECT_EQ(static_cast<unsigned char>(big[7]), 0x01);
  EXPECT_EQ(static_cast<unsigned char>(big[8]), 0x11);
  EXPECT_EQ(static_cast<unsigned char>(big[9]), 0x70);
}

TEST(WsDeflate, AMessageDeflatedOnceInflatesBackAndIsSmaller) {
  const auto text = update_like(8);
  const auto payload = deflate_message(text);
  EXPECT_LT(payload.size() * 3, text.size());
  ASSERT_GE(payload.size(), 4u);
  EXPECT_NE(payload.substr(payload.size() - 4), std::string("\0\0\xff\xff", 4));  // the tail is removed
  EXPECT_EQ(inflate_message(payload, text.size()), text);
  EXPECT_FALSE(inflate_message(payload, text.size() - 1));  // bounded: one byte short of the message
  EXPECT_FALSE(inflate_message("\xff\xff\xff not deflate", 1000));
  const auto frame = deflated_text_frame(text);
  EXPECT_EQ(static_cast<unsigned char>(frame[0]), 0xc1);  // FIN, RSV1, text
  EXPECT_EQ(frame.substr(frame.size() - payload.size()), payload);
}

TEST(WsDeflate, ReaderUnmasksMessagesAndFragments) {
  FrameReader r(1000, true);
  std::string in = client_frame(0x81, "hello");
  in += client_frame(0x01, "frag") + client_frame(0x89, "p1") + client_frame(0x80, "ments");
  auto e = r.next(in);
  ASSERT_EQ(e.kind, FrameReader::Kind::Message);
  EXPECT_EQ(e.payload, "hello");
  EXPECT_FALSE(e.binary);
  e = r.next(in);  // a ping between two fragments comes first
  ASSERT_EQ(e.kind, FrameReader::Kind::Ping);
  EXPECT_EQ(e.payload, "p1");
  e = r.next(in);
  ASSERT_EQ(e.kind, FrameReader::Kind::Message);
  EXPECT_EQ(e.payload, "fragments");
  EXPECT_TRUE(in.empty());
  EXPECT_EQ(r.next(in).kind, FrameReader::Kind::NeedMore);
}

TEST(WsDeflate, ReaderInflatesCompressedMessagesAndWaitsForWholeFrames) {
  FrameReader r(100000, true);
  const auto text = update_like(20);
  std::string whole = client_frame(0xc1, deflate_message(text));
  std::string in = whole.substr(0, whole.size() / 2);
  EXPECT_EQ(r.next(in).kind, FrameReader::Kind::NeedMore);
  EXPECT_EQ(in.size(), whole.size() / 2);  // nothing consumed
  in += whole.substr(whole.size() / 2);
  auto e = r.next(in);
  ASSERT_EQ(e.kind, FrameReader::Kind::Message);
  EXPECT_EQ(e.payload, text);
  // Compressed, in two fragments (RSV1 on the first only).
  const auto payload = deflate_message("{\"event\":\"set_period\"}");
  in = client_frame(0x41, payload.substr(0, 3)) + client_frame(0x80, payload.substr(3));
  e = r.next(in);
  ASSERT_EQ(e.kind, FrameReader::Kind::Message);
  EXPECT_EQ(e.payload, "{\"event\":\"set_period\"}");
}

TEST(WsDeflate, ReaderReportsCloseAndPong) {
  FrameReader r(100, true);
  std::string in = client_frame(0x8a, "") + client_frame(0x88, std::string("\x03\xe8", 2) + "bye");
  EXPECT_EQ(r.next(in).kind, FrameReader::Kind::Pong);
  auto e = r.next(in);
  ASSERT_EQ(e.kind, FrameReader::Kind::Close);
  EXPECT_EQ(e.close_code, 1000);
  in = client_frame(0x88, "");
  EXPECT_EQ(r.next(in).close_code, 1005);
}

// Each bad input: an error with the close code RFC 6455 names.
TEST(WsDeflate, ReaderRefusesBadFrames) {
  auto error_of = [](const std::string& bytes, std::size_t limit = 100, bool deflate = true) {
    FrameReader r(limit, deflate);
    std::string in = bytes;
    bool message = false;
    for (int i = 0; i < 8; ++i) {
      auto e = r.next(in);
      if (e.kind == FrameReader::Kind::Error) return static_cast<int>(e.close_code);
      if (e.kind == FrameReader::Kind::NeedMore) break;
      message = message || e.kind == FrameReader::Kind::Message;
    }
    return message ? -1 : 0;  // -1: read as a message; 0: waits for more
  };
  EXPECT_EQ(error_of(client_frame(0x81, "x", false)), 1002);                     // unmasked
  EXPECT_EQ(error_of(client_frame(0xa1, "x")), 1002);                            // RSV2
  EXPECT_EQ(error_of(client_frame(0xc1, "x", true), 100, false), 1002);          // RSV1 without deflate
  EXPECT_EQ(error_of(client_frame(0x83, "x")), 1002);                            // reserved opcode
  EXPECT_EQ(error_of(client_frame(0x80, "x")), 1002);                            // continuation first
  EXPECT_EQ(error_of(client_frame(0x01, "a") + client_frame(0x81, "b")), 1002);  // new message mid-way
  EXPECT_EQ(error_of(client_frame(0x09, "p")), 1002);                            // fragmented ping
  EXPECT_EQ(error_of(client_frame(0x89, std::string(126, 'p')), 1000), 1002);    // control over 125 bytes
  EXPECT_EQ(error_of(client_frame(0x81, std::string(101, 'x'))), 1009);          // over the limit
  EXPECT_EQ(error_of(client_frame(0x01, std::string(60, 'x')) + client_frame(0x80, std::string(60, 'x'))), 1009);
  EXPECT_EQ(error_of(client_frame(0xc1, deflate_message(std::string(500, 'a')))), 1009);  // inflates past it
  EXPECT_EQ(error_of(client_frame(0xc1, "\xff\xff\xff")), 1009);                          // not deflate
  EXPECT_EQ(error_of(client_frame(0x81, "\xc0\xaf")), 1007);                              // overlong UTF-8
  EXPECT_EQ(error_of(client_frame(0x88, "\x03")), 1002);                                  // close of one byte
  EXPECT_EQ(error_of(client_frame(0x88, std::string("\x03\xed", 2))), 1002);              // close code 1005 sent
  // A 16-bit length for a short payload: not the shortest form.
  EXPECT_EQ(error_of(std::string("\x81\xfe\x00\x05\x00\x00\x00\x00hello", 13)), 1002);
  // A declared length over the limit fails at once, before its payload arrives.
  EXPECT_EQ(error_of(std::string("\x81\xff\x00\x00\x00\x01\x00\x00\x00\x00", 10)), 1009);
  EXPECT_EQ(error_of(std::string("\x81\xff\x80\x00\x00\x00\x00\x00\x00\x00", 10)), 1002);
  EXPECT_EQ(error_of(client_frame(0x82, "\xff\xfe")), -1);  // binary is not UTF-8 checked (a message)
  // RSV1 marks a message's first frame only: not a continuation, not a control frame.
  EXPECT_EQ(error_of(client_frame(0x01, "a") + client_frame(0xc0, "b")), 1002);
  EXPECT_EQ(error_of(client_frame(0xc9, "p")), 1002);
  EXPECT_EQ(error_of(client_frame(0xca, "p")), 1002);
  EXPECT_EQ(error_of(client_frame(0xc8, std::string("\x03\xe8", 2))), 1002);
}

TEST(WsDeflate, CloseCodesOfTheRegistryAreAccepted) {
  auto code_of = [](unsigned code) {
    FrameReader r(100, true);
    std::string in = client_frame(0x88, std::string{static_cast<char>(code >> 8), static_cast<char>(code & 0xff)});
    const auto e = r.next(in);
    return e.kind == FrameReader::Kind::Close ? static_cast<int>(e.close_code) : -static_cast<int>(e.close_code);
  };
  for (unsigned code : {1000u, 1001u, 1003u, 1007u, 1011u, 1012u, 1013u, 1014u, 3000u, 4999u})
    EXPECT_EQ(code_of(code), static_cast<int>(code));
  for (unsigned code : {999u, 1004u, 1005u, 1006u, 1015u, 1016u, 2999u, 5000u}) EXPECT_EQ(code_of(code), -1002) << code;
}

// A whole read's frames consumed by offset: the bytes stay in place until the caller erases them once.
TEST(WsDeflate, ReaderConsumesByOffset) {
  FrameReader r(1000, true);
  std::string in;
  for (int i = 0; i < 500; ++i) in += client_frame(0x8a, "");                       // a stream of pongs
  in += client_frame(0x01, "") + client_frame(0x00, "") + client_frame(0x80, "x");  // empty fragments
  in += client_frame(0x81, "tail").substr(0, 4);
  const std::string copy = in;
  std::size_t pos = 0;
  for (int i = 0; i < 500; ++i) ASSERT_EQ(r.next(std::string_view(in), pos).kind, FrameReader::Kind::Pong);
  EXPECT_EQ(pos, 500u * 6);
  auto e = r.next(std::string_view(in), pos);
  ASSERT_EQ(e.kind, FrameReader::Kind::Message);
  EXPECT_EQ(e.payload, "x");
  const std::size_t before_tail = pos;
  EXPECT_EQ(r.next(std::string_view(in), pos).kind, FrameReader::Kind::NeedMore);
  EXPECT_EQ(pos, before_tail);  // the incomplete frame is not consumed
  EXPECT_EQ(in, copy);
  EXPECT_EQ(in.size() - pos, 4u);
}

// A shared text's deflated frame is made once, whoever asks first, and is the same bytes for everyone.
TEST(WsDeflate, SharedTextKeepsItsDeflatedFrame) {
  auto text = shared_text(update_like(16));
  std::vector<std::shared_ptr<const std::string>> frames(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < frames.size(); ++i)
    threads.emplace_back([&frames, &text, i] { frames[i] = shared_deflated_frame(text); });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(frames[0]);
  for (const auto& f : frames) EXPECT_EQ(f.get(), frames[0].get());  // one frame, not one per caller
  EXPECT_EQ(*frames[0], deflated_text_frame(*text));
  // The frame keeps the text's block alive after the text's own pointers are gone.
  const std::weak_ptr<const std::string> weak = text;
  auto frame = frames[0];
  frames.clear();
  text.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(*frame, deflated_text_frame(update_like(16)));
  // Not shared: a plain string (a connection's own reply), or an alias into a shared text's block.
  EXPECT_FALSE(shared_deflated_frame(std::make_shared<const std::string>(update_like(16))));
  EXPECT_FALSE(shared_deflated_frame(frame));
}

TEST(WsDeflate, Utf8Validation) {
  EXPECT_TRUE(valid_utf8("plain ascii"));
  EXPECT_TRUE(valid_utf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(valid_utf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(valid_utf8("\xff"));
}

}  // namespace
}  // namespace gf::wire::ws
