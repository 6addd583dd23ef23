#pragma once
// Socket.IO v5 over Engine.IO v4, without sockets: sessions by sid, ping bookkeeping, the polling
// queue (one pending GET at a time), the upgrade to WebSocket, and the default namespace's events.
// A connected session is one more WsHub client: Socket.IO and /ws clients share the collection
// subscriptions per period, the client cap and the alert broadcasts. The transport (http_session.cpp,
// websocket.cpp) moves bytes: it hands client packets in and takes queued packets out when woken.
// Time is passed in (the transport reads the clock); tests drive pings and timeouts with any time.
// Thread-safety: every public member may be called from any thread.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.hpp"
#include "node/agent.hpp"
#include "server/ws_hub.hpp"

namespace gf::server {

struct SioOptions {
  std::chrono::milliseconds ping_interval{25000};
  std::chrono::milliseconds ping_timeout{20000};
  std::size_t max_payload = 1000000;  // bytes of one polling body or one WebSocket message
  // A polling body before the session is connected (and so authorised): enough for a CONNECT with its
  // token, never a megabyte from an unauthenticated client.
  std::size_t unconnected_payload = 4096;
  std::size_t queue = 64;  // Engine.IO packets waiting per session (an update is two)
  // Bytes waiting per session, broadcasts included (shared with other sessions, but a session that
  // does not read must not hold many of them), and in all for what sessions queue for themselves alone
  // (replies, acknowledgements, pings). Past either, droppable updates go first; a session whose
  // reply does not fit is closed.
  std::size_t max_queued_bytes = 2u << 20;
  std::size_t max_total_queued_bytes = 64u << 20;
  // Sessions per client address, where all of 127.0.0.0/8 and ::1 count as one address (any local user
  // may bind any of them) and so does an IPv6 /64 (security.hpp's client_bucket).
  std::size_t max_sessions_per_address = 64;
  // Whether a CONNECT's auth {"token": …} is good; unset: any token is refused (only a session
  // authorised at the handshake connects).
  std::function<bool(std::string_view)> token_ok;
};

enum class SioTransport { Polling, WebSocket };

class SocketIo;

class SioSession final : public WsClient, public std::enable_shared_from_this<SioSession> {
 public:
  SioSession(SocketIo& owner, std::string sid, std::string address, bool authorized,
             std::optional<std::chrono::milliseconds> period, SioTransport transport,
             std::chrono::steady_clock::time_point now);
  ~SioSession() override = default;

  const std::string& sid() const noexcept { return sid_; }
  const std::string& address() const noexcept { return address_; }
  // The Engine.IO open packet (the handshake's answer, or the first WebSocket message).
  std::string open_packet() const;

  // WsClient: a hub message becomes Socket.IO event packets (sio_frames), queued.
  void send(const Message& message) override;

  // One Engine.IO packet from the client. Returns what goes back at once on the same WebSocket
  // ("3probe" during an upgrade), else nullopt. A bad packet closes the session.
  std::optional<std::string> on_packet(std::string_view packet, SioTransport via);
  // A polling POST body. An error (too large, malformed) closes the session.
  Result<void> on_payload(std::string_view body);

  enum class Poll { Ready, Wait, Refused };
  // A polling GET. Ready: call take_payload() now. Wait: `wake` is called once (from any thread) when
  // there is something to take, or the session closed; then call take_payload(). Refused: the session
  // uses WebSocket now, or a GET is pending already (which closes the session, as the protocol says).
  Poll begin_poll(std::function<void()> wake);
  // The answer to the pending GET: queued packets joined (at most max_payload bytes, at least one
  // packet), "1" (close) when the session is closed, "6" (noop) when nothing is queued.
  std::string take_payload();

  // The WebSocket transport of this session (new, or an upgrade from polling). attach_ws() is false
  // when the session cannot take one (closed, already on or upgrading to WebSocket).
  bool attach_ws(std::function<void()> wake);
  // The WebSocket went away: before the upgrade completed the session stays on polling; after, it closes.
  void detach_ws();
  // The next packet for the WebSocket; nullopt when none (or the session is not on WebSocket yet).
  std::optional<Text> take_one();

  void close();
  bool closed() const;
  bool on_websocket() const;
  bool connected() const;  // the Socket.IO CONNECT was accepted

 private:
  friend class SocketIo;
  // Pings and timeouts; false when the session is (now) closed.
  bool tick(std::chrono::steady_clock::time_point now);
  void on_socketio(std::string_view data);
  void connect(const nlohmann::json& auth, const std::string& nsp);
  void collect_wakes_locked(std::vector<std::function<void()>>& wakes);
  // from_hub: called on a hub thread (send()), which may be inside a collection tick: leaving the hub
  // there could wait for that very tick, so the removal is left to SocketIo::tick().
  // Session-made packets are charged to the server's byte budget; the hub's broadcasts are not.
  void enqueue(std::vector<Text> packets, bool droppable, bool from_hub = false);
  // Under mu_: one packet into the queue within both byte budgets; false when it does not fit and may
  // not be dropped.
  bool push_locked(Text packet, bool droppable, bool charged);
  // Under mu_: tells the owner how the queue's charged bytes changed since `before`.
  void settle_charge_locked(std::size_t before);
  void close_session(bool from_hub);
  static void run(std::vector<std::function<void()>>& wakes);

  SocketIo& owner_;
  const std::string sid_;
  const std::string address_;
  const bool authorized_;
  const std::optional<std::chrono::milliseconds> period_;
  const bool started_on_ws_;
  const std::chrono::steady_clock::time_point created_;

  mutable std::mutex mu_;
  OutboundQueue queue_;
  bool closed_ = false;
  bool on_ws_ = false;
  bool upgrading_ = false;
  bool probed_ = false;  // the upgrading WebSocket's "2probe" was answered (once per upgrade)
  bool ws_attached_ = false;
  bool poll_pending_ = false;
  bool connected_ = false;
  std::optional<std::uint64_t> hub_id_;
  std::function<void()> poll_wake_;
  std::function<void()> ws_wake_;
  std::chrono::steady_clock::time_point next_ping_;
  // The last tick that saw a pending GET or a WebSocket: a session with neither for two ping intervals
  // holds no connection at all, and is closed.
  std::chrono::steady_clock::time_point last_live_;
  std::optional<std::chrono::steady_clock::time_point> pong_due_;
};

class SocketIo {
 public:
  SocketIo(WsHub& hub, node::Agent& agent, SioOptions options);
  ~SocketIo();
  SocketIo(const SocketIo&) = delete;
  SocketIo& operator=(const SocketIo&) = delete;

  struct OpenRequest {
    std::string address;
    bool authorized = false;  // the handshake carried a good token (or none is needed)
    std::optional<std::chrono::milliseconds> period;
    SioTransport transport = SioTransport::Polling;
  };
  // A new Engine.IO session. Errors: Unavailable when the client cap (with /ws clients) or the
  // per-address cap is reached, or when Socket.IO sessions hold three quarters of the client places
  // (the last quarter is kept for /ws, the dashboard's feed).
  Result<std::shared_ptr<SioSession>> open(const OpenRequest& r, std::chrono::steady_clock::time_point now);
  std::shared_ptr<SioSession> find(std::string_view sid) const;
  // Sends pings, closes sessions whose pong or CONNECT is late, forgets closed ones. Call about once a
  // second.
  void tick(std::chrono::steady_clock::time_point now);
  // tick() spread over `slices` calls: each ticks the next share of the sessions of a round taken at its
  // first call; true when a round ends. For a caller on the I/O thread (one caller only), which calls it
  // `slices` times a second: 10 000 sessions in one go were ~5 ms that a request waited behind.
  bool tick_slice(std::chrono::steady_clock::time_point now, std::size_t slices);
  // Closes every session (their pending GETs and WebSockets are woken to finish).
  void close_all();
  std::size_t sessions() const;
  // Bytes the sessions hold queued for themselves alone (max_total_queued_bytes bounds it).
  std::size_t charged_bytes() const noexcept { return charged_bytes_.load(); }
  const SioOptions& options() const noexcept { return options_; }

 private:
  friend class SioSession;
  void forget(const std::string& sid);
  void remove_from_hub_later(std::uint64_t hub_id);
  void remove_deferred();
  WsHub& hub_;
  node::Agent& agent_;
  SioOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<SioSession>> sessions_;
  std::unordered_map<std::string, std::size_t> per_address_;  // by client_bucket
  std::atomic<std::size_t> charged_bytes_{0};
  std::vector<std::uint64_t> deferred_removals_;  // hub ids of sessions closed on a hub thread
  std::vector<std::weak_ptr<SioSession>> round_;  // tick_slice: the round under way
  std::size_t round_next_ = 0;                    // ... and its next session
};

// The Socket.IO transport's frames of a hub message, made once per message: the Engine.IO message of
// the event under its name, and for gpu_status / gpu_status_update also under the seeds' names
// (system:initial_status / system:metrics_update). Every session sends the same frames.
const Message::Frames& sio_frames(const Message& m);

}  // namespace gf::server
