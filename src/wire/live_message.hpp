#pragma once
// LiveMessage: what the agent sends its live clients (the /ws WebSocket and Socket.IO): an event name and
// its data, JSON text. A message is framed by each transport that sends it, once: the first client of a
// transport frames it (framed()), and the frames are kept with the message for every other client of
// that transport. The transports own their framings (server/ws_hub.cpp, server/socketio.cpp).
// Thread-safety: immutable but for the frames, which framed() makes once whatever the threads.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gf::wire {

class LiveMessage {
 public:
  using Text = std::shared_ptr<const std::string>;
  using Frames = std::vector<Text>;
  enum class Framing : std::uint8_t { WebSocket, SocketIo };

  // `data` is JSON text ("null" when null). Droppable: a newer message of the kind supersedes it
  // (periodic updates); alerts and replies are not.
  LiveMessage(std::string event, Text data, bool droppable = false)
      : event_(std::move(event)), data_(std::move(data)), droppable_(droppable) {}

  const std::string& event() const noexcept { return event_; }
  const std::string& data() const noexcept { return *data_; }
  bool droppable() const noexcept { return droppable_; }

  // This message's frames for `framing`, made by `frame` on the first call for that framing; later calls
  // return the same frames.
  const Frames& framed(Framing framing, Frames (*frame)(const LiveMessage&)) const {
    auto& slot = frames_[static_cast<std::size_t>(framing)];
    std::call_once(slot.once, [&] { slot.frames = frame(*this); });
    return slot.frames;
  }

 private:
  struct Slot {
    std::once_flag once;
    Frames frames;
  };
  std::string event_;
  Text data_;
  bool droppable_;
  mutable std::array<Slot, 2> frames_;
};

using LiveMessagePtr = std::shared_ptr<const LiveMessage>;

}  // namespace gf::wire
