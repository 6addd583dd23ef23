// ObjectText and LiveMessage: a document rendered once, members added per request, and a message
// framed once per transport.
#include "wire/object_text.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "wire/live_message.hpp"

namespace gf::wire {
namespace {

using nlohmann::json;

// What json_response would send for `doc` with `extra` merged in: the bytes ObjectText must give.
std::string merged(json doc, const json& extra) {
  for (auto it = extra.begin(); it != extra.end(); ++it) doc[it.key()] = it.value();
  return dump_json(doc);
}

TEST(ObjectText, TextIsTheDumpOfTheObject) {
  const json doc = {{"node", "n1"},
                    {"gpus", json::array({{{"index", 0}, {"name", "A100 \"80GB\""}}})},
                    {"timestamp", 1.5},
                    {"backend", "nvml"},
                    {"empty", json::object()}};
  EXPECT_EQ(*ObjectText(doc).text(), dump_json(doc));
  EXPECT_EQ(*ObjectText(json::object()).text(), "{}");
}

TEST(ObjectText, AddedMembersLandWhereTheDumpPutsThem) {
  const json doc = {{"backend", "nvml"}, {"gpus", json::array({1, 2})}, {"node", "n1"}, {"timestamp", 7}};
  const ObjectText t(doc);
  for (const json& extra : {json::object(),                                       // nothing
                            json{{"stale", false}, {"age_s", 0.25}},              // first and between
                            json{{"zzz", 1}},                                     // last
                            json{{"aaa", 1}, {"aab", "x"}},                       // two before the first
                            json{{"message", "no GPU"}, {"z1", nullptr}},         // middle and end
                            json{{"node", "replaced"}, {"gpus", json::array()}},  // existing keys
                            json{{"timestamp", 8}, {"u", 1}}}) {                  // replace the last, then one more
    EXPECT_EQ(*t.with(extra), merged(doc, extra)) << extra.dump();
  }
  EXPECT_EQ(*ObjectText(json::object()).with({{"stale", true}, {"age_s", 3}}),
            merged(json::object(), {{"stale", true}, {"age_s", 3}}));
  EXPECT_EQ(*t.text(), dump_json(doc));  // the rendering itself is untouched
}

TEST(ObjectText, InvalidUtf8IsReplacedAsTheRoutesDo) {
  const json doc = {{"name", std::string("bad \xff byte")}};
  const ObjectText t(doc);
  EXPECT_EQ(*t.text(), dump_json(doc));
  EXPECT_NE(t.text()->find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD
  EXPECT_EQ(*t.with({{"age_s", 1}}), merged(doc, {{"age_s", 1}}));
}

LiveMessage::Frames count_and_frame(const LiveMessage& m) {
  static std::atomic<int> calls{0};
  ++calls;
  return {std::make_shared<const std::string>(m.event() + ":" + m.data() + ":" + std::to_string(calls.load()))};
}

TEST(LiveMessage, EachFramingIsMadeOnceWhateverTheThreads) {
  const LiveMessage m("gpu_status_update", std::make_shared<const std::string>("{}"), true);
  EXPECT_TRUE(m.droppable());
  std::vector<const std::string*> seen(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back(
        [&, i] { seen[i] = m.framed(LiveMessage::Framing::WebSocket, count_and_frame).front().get(); });
  for (auto& t : threads) t.join();
  for (const auto* p : seen) EXPECT_EQ(p, seen[0]);  // one framing, shared
  // The other transport frames on its own, once too.
  const auto& sio = m.framed(LiveMessage::Framing::SocketIo, count_and_frame);
  EXPECT_NE(sio.front().get(), seen[0]);
  EXPECT_EQ(m.framed(LiveMessage::Framing::SocketIo, count_and_frame).front().get(), sio.front().get());
}

}  // namespace
}  // namespace gf::wire
