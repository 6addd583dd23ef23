#pragma once
// WebSocket fan-out, without sockets: which client gets which message when. Clients choose their
// update period (grouped: one collection subscription and one rendering per distinct period, shared by
// every client of that period: the reading's one update message, node::Renderings); alerts go to
// everyone. A message is (event, data): the transport implements WsClient and frames it.
// Thread-safety: every public member may be called from any thread.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/alerts.hpp"
#include "node/agent.hpp"
#include "sampler/hub.hpp"
#include "wire/live_message.hpp"

namespace gf::server {

using Text = std::shared_ptr<const std::string>;
// A live message: (event, data); each transport frames it once (wire/live_message.hpp).
using Message = wire::LiveMessage;
using MessagePtr = wire::LiveMessagePtr;

// The /ws transport's frame of a message: {"event":<event>,"data":<data>}, made once per message.
const Text& ws_frame(const Message& m);

// What one connection still has to send. Periodic updates may be dropped (the oldest first: a newer
// one supersedes it); alerts and replies may not. Bounded in messages and in bytes: a message that
// would pass either bound first drops the oldest droppable ones; when none is left to drop, it is
// refused (the client does not read), unless it is an update larger than the whole budget alone.
// Bytes a message marks `charged` are also counted apart (charged_bytes()), for a budget its owner keeps
// across connections (messages made for this connection alone, not broadcasts shared by all).
// Pure; one per connection, used by its owner only.
class OutboundQueue {
 public:
  explicit OutboundQueue(std::size_t capacity, std::size_t max_bytes = SIZE_MAX)
      : capacity_(capacity < 1 ? 1 : capacity), max_bytes_(max_bytes) {}
  // false when the message does not fit and may not be dropped: the client is not reading.
  bool push(Text text, bool droppable, bool charged = false);
  std::optional<Text> pop();
  // The next message, left in place; null when none.
  const Text* front() const noexcept { return items_.empty() ? nullptr : &items_.front().text; }
  void clear();
  bool empty() const noexcept { return items_.empty(); }
  std::size_t size() const noexcept { return items_.size(); }
  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t charged_bytes() const noexcept { return charged_bytes_; }
  std::uint64_t dropped() const noexcept { return dropped_; }

 private:
  struct Item {
    Text text;
    bool droppable;
    bool charged;
  };
  void erase(std::deque<Item>::iterator it);
  std::size_t capacity_;
  std::size_t max_bytes_;
  std::deque<Item> items_;
  std::size_t bytes_ = 0;
  std::size_t charged_bytes_ = 0;
  std::uint64_t dropped_ = 0;
};

// A connected client, as the hub sees it. send() must not block (frame, queue and return); the message
// lives only for the call.
class WsClient {
 public:
  virtual ~WsClient() = default;
  virtual void send(const Message& message) = 0;
};

struct WsOptions {
  std::size_t max_clients = 1024;
  std::chrono::milliseconds default_period{5000};
  std::chrono::milliseconds min_period{100};
  std::chrono::milliseconds max_period{3600000};
  // Socket.IO sessions per client address (SioOptions::max_sessions_per_address; the hub does not use it).
  std::size_t sio_sessions_per_address = 64;
};

class WsHub {
 public:
  WsHub(node::Agent& agent, sampler::SampleHub& hub, WsOptions options);
  ~WsHub();
  WsHub(const WsHub&) = delete;
  WsHub& operator=(const WsHub&) = delete;

  // Registers a client: nullopt when the cap is reached. The client then gets the gpu_status message
  // (returned here, for the transport to send first) and updates every period.
  struct Joined {
    std::uint64_t id;
    MessagePtr greeting;
  };
  std::optional<Joined> add(std::weak_ptr<WsClient> client, std::optional<std::chrono::milliseconds> period);
  void remove(std::uint64_t id);
  std::size_t clients() const;
  std::size_t max_clients() const noexcept { return options_.max_clients; }
  // Forgets every client and stops the update subscriptions (waiting for a tick in flight): after it
  // returns, no client's send() is called again.
  void close_all();

  // A message from client `id` (the /ws protocol: {"event": name, "data": …}); returns the reply to
  // send it (nullopt: none).
  std::optional<MessagePtr> on_message(std::uint64_t id, std::string_view text);

  // Sends to every client.
  void broadcast(const Message& message);
  // An event with its data to every client (not droppable: lease and job events).
  void broadcast(std::string_view event, const nlohmann::json& data);
  // Each alert event to every client (not droppable): its kind's event name, the alert as data.
  void broadcast_alerts(const std::vector<core::AlertEvent>& events);

  // The period a requested one becomes (clamped to [min, max], rounded to 100 ms).
  std::chrono::milliseconds clamp_period(std::chrono::milliseconds p) const;

 private:
  struct Group {
    sampler::SampleHub::Subscription sub;
    std::set<std::uint64_t> members;
  };
  struct Client {
    std::weak_ptr<WsClient> link;
    std::chrono::milliseconds period;
  };
  void join_group_locked(std::uint64_t id, std::chrono::milliseconds period,
                         std::vector<sampler::SampleHub::Subscription>& to_reset);
  void leave_group_locked(std::uint64_t id, std::chrono::milliseconds period,
                          std::vector<sampler::SampleHub::Subscription>& to_reset);
  void on_group_tick(std::chrono::milliseconds period, const Result<core::SnapshotPtr>& s);

  node::Agent& agent_;
  sampler::SampleHub& hub_;
  WsOptions options_;
  mutable std::mutex mu_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, Client> clients_;
  std::map<std::chrono::milliseconds, Group> groups_;
};

}  // namespace gf::server
