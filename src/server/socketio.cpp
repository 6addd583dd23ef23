#include "server/socketio.hpp"

#include <algorithm>

#include "platform/fs.hpp"
#include "platform/log.hpp"
#include "server/security.hpp"
#include "wire/engineio.hpp"
#include "wire/ws_frame.hpp"

namespace gf::server {

namespace {

Text text(std::string s) { return std::make_shared<const std::string>(std::move(s)); }

// An Engine.IO message carrying one Socket.IO packet; shared (wire/ws_frame.hpp): a deflate WebSocket
// finds its deflated frame with it, made once for every such connection.
Text message(std::string sio_packet) { return wire::ws::shared_text("4" + std::move(sio_packet)); }
// The same for one connection's own reply: not shared, so it goes uncompressed (no deflate per request).
Text own_message(std::string sio_packet) { return text("4" + std::move(sio_packet)); }

const std::string kNull = "null";

// The name a Socket.IO client of the seed implementation listens to as well ("" when none).
std::string_view alias_of(std::string_view event) {
  if (event == "gpu_status") return "system:initial_status";
  if (event == "gpu_status_update") return "system:metrics_update";
  return {};
}

Message::Frames frame_sio(const Message& m) {
  Message::Frames out{message(wire::sio::encode_event(m.event(), m.data()))};
  if (auto alias = alias_of(m.event()); !alias.empty())
    out.push_back(message(wire::sio::encode_event(alias, m.data())));
  return out;
}

}  // namespace

const Message::Frames& sio_frames(const Message& m) { return m.framed(Message::Framing::SocketIo, frame_sio); }

// ---------------------------------------------------------------------------------------------------
// SioSession

SioSession::SioSession(SocketIo& owner, std::string sid, std::string address, bool authorized,
                       std::optional<std::chrono::milliseconds> period, SioTransport transport,
                       std::chrono::steady_clock::time_point now)
    : owner_(owner),
      sid_(std::move(sid)),
      address_(std::move(address)),
      authorized_(authorized),
      period_(period),
      started_on_ws_(transport == SioTransport::WebSocket),
      created_(now),
      queue_(owner.options_.queue, owner.options_.max_queued_bytes),
      on_ws_(started_on_ws_),
      next_ping_(now + owner.options_.ping_interval),
      last_live_(now) {}

std::string SioSession::open_packet() const {
  wire::eio::OpenInfo o;
  o.sid = sid_;
  o.upgrade_to_websocket = !started_on_ws_;
  o.ping_interval_ms = owner_.options_.ping_interval.count();
  o.ping_timeout_ms = owner_.options_.ping_timeout.count();
  o.max_payload = static_cast<std::int64_t>(owner_.options_.max_payload);
  return wire::eio::encode_open(o);
}

void SioSession::run(std::vector<std::function<void()>>& wakes) {
  for (auto& w : wakes)
    if (w) w();
  wakes.clear();
}

void SioSession::collect_wakes_locked(std::vector<std::function<void()>>& wakes) {
  if (closed_) {
    if (poll_wake_) wakes.push_back(std::move(poll_wake_));
    if (ws_wake_) wakes.push_back(std::move(ws_wake_));
    poll_wake_ = nullptr;
    ws_wake_ = nullptr;
    return;
  }
  if (queue_.empty()) return;
  if (on_ws_) {
    if (ws_wake_) wakes.push_back(ws_wake_);  // the WebSocket's waker stays: it is called per batch
  } else if (poll_wake_) {
    wakes.push_back(std::move(poll_wake_));  // a pending GET is answered once
    poll_wake_ = nullptr;
  }
}

bool SioSession::push_locked(Text packet, bool droppable, bool charged) {
  if (charged && owner_.charged_bytes_.load() + packet->size() > owner_.options_.max_total_queued_bytes)
    return droppable;  // over the server's budget: a droppable packet is dropped, a reply does not fit
  const std::size_t before = queue_.charged_bytes();
  const bool ok = queue_.push(std::move(packet), droppable, charged);
  settle_charge_locked(before);
  return ok;
}

void SioSession::settle_charge_locked(std::size_t before) {
  const std::size_t after = queue_.charged_bytes();
  if (after > before)
    owner_.charged_bytes_ += after - before;
  else
    owner_.charged_bytes_ -= before - after;
}

void SioSession::enqueue(std::vector<Text> packets, bool droppable, bool from_hub) {
  std::vector<std::function<void()>> wakes;
  bool overflow = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    for (auto& p : packets)
      if (!push_locked(std::move(p), droppable, !from_hub)) overflow = true;
    collect_wakes_locked(wakes);
  }
  run(wakes);
  // Full of messages that may not be dropped: the client does not read. It must not hold memory.
  // (Only this closure is logged: the others follow a client's own bad packet, and logging those
  // would let any client fill the log.)
  if (overflow) {
    platform::log_line("socket.io", "closing session " + sid_.substr(0, 8) + "… of " + address_ + ": it does not read");
    close_session(from_hub);
  }
}

void SioSession::send(const Message& m) {
  {
    std::lock_guard lock(mu_);
    if (closed_ || !connected_) return;
  }
  const auto& frames = sio_frames(m);
  enqueue(std::vector<Text>(frames.begin(), frames.end()), m.droppable(), true);
}

bool SioSession::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

bool SioSession::on_websocket() const {
  std::lock_guard lock(mu_);
  return on_ws_;
}

bool SioSession::connected() const {
  std::lock_guard lock(mu_);
  return connected_;
}

void SioSession::close() { close_session(false); }

void SioSession::close_session(bool from_hub) {
  auto self = shared_from_this();  // the owner's map may hold the last other reference
  std::vector<std::function<void()>> wakes;
  std::optional<std::uint64_t> hub_id;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    connected_ = false;
    hub_id = hub_id_;
    hub_id_.reset();
    const std::size_t before = queue_.charged_bytes();
    queue_.clear();  // nothing more is sent: its memory goes now
    settle_charge_locked(before);
    collect_wakes_locked(wakes);
  }
  // Outside the session's lock: removing may wait for a hub tick that is sending to this session.
  if (hub_id) {
    if (from_hub)
      owner_.remove_from_hub_later(*hub_id);
    else
      owner_.hub_.remove(*hub_id);
  }
  owner_.forget(sid_);
  run(wakes);
}

SioSession::Poll SioSession::begin_poll(std::function<void()> wake) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return Poll::Ready;  // answered with the close packet
    if (on_ws_) return Poll::Refused;
    if (!poll_pending_) {
      poll_pending_ = true;
      if (!queue_.empty()) return Poll::Ready;
      poll_wake_ = std::move(wake);
      return Poll::Wait;
    }
  }
  close();
  return Poll::Refused;
}

std::string SioSession::take_payload() {
  std::lock_guard lock(mu_);
  poll_pending_ = false;
  poll_wake_ = nullptr;
  if (closed_) return "1";
  if (on_ws_ || queue_.empty()) return "6";
  const std::size_t before = queue_.charged_bytes();
  std::string out;
  // Joined once: an update is two ~17 KiB packets, which appends alone would copy again as the string grows.
  out.reserve(std::min(queue_.bytes() + queue_.size(), owner_.options_.max_payload));
  while (const Text* next = queue_.front()) {
    // A packet that does not fit waits for the next GET (at least one packet goes).
    if (!out.empty() && out.size() + 1 + (*next)->size() > owner_.options_.max_payload) break;
    if (!out.empty()) out += '\x1e';
    out += **next;
    queue_.pop();
  }
  settle_charge_locked(before);
  return out;
}

bool SioSession::attach_ws(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  if (closed_ || ws_attached_) return false;
  if (!on_ws_) upgrading_ = true;  // from polling: the probe comes first
  probed_ = false;
  ws_attached_ = true;
  ws_wake_ = std::move(wake);
  return true;
}

void SioSession::detach_ws() {
  bool close_now = false;
  {
    std::lock_guard lock(mu_);
    if (!ws_attached_) return;
    ws_attached_ = false;
    ws_wake_ = nullptr;
    if (on_ws_) close_now = true;
    upgrading_ = false;  // a failed probe: polling goes on
  }
  if (close_now) close();
}

std::optional<Text> SioSession::take_one() {
  std::lock_guard lock(mu_);
  if (closed_ || !on_ws_) return std::nullopt;
  const std::size_t before = queue_.charged_bytes();
  auto next = queue_.pop();
  settle_charge_locked(before);
  return next;
}

std::optional<std::string> SioSession::on_packet(std::string_view packet, SioTransport via) {
  auto p = wire::eio::parse_packet(packet);
  if (!p) {
    close();
    return std::nullopt;
  }
  if (via == SioTransport::WebSocket) {
    std::vector<std::function<void()>> wakes;
    bool probe = false;
    bool violation = false;
    {
      std::lock_guard lock(mu_);
      if (closed_) return std::nullopt;
      if (!on_ws_) {
        // The probing WebSocket of an upgrade: one "2probe" → "3probe", and the pending GET ends with
        // a noop so that the client can pause polling; "5" completes the switch. Before the probe,
        // nothing else counts; after it, anything but "5" (a second probe included) ends the session:
        // each answer would be memory an unauthenticated client makes the agent hold.
        if (!upgrading_) return std::nullopt;
        const bool is_probe = p->type == wire::eio::Type::Ping && p->data == "probe";
        if (is_probe && !probed_) {
          probe = true;
          probed_ = true;
        } else if (p->type == wire::eio::Type::Upgrade) {
          on_ws_ = true;
          upgrading_ = false;
        } else if (probed_ || is_probe) {
          violation = true;
        } else {
          return std::nullopt;
        }
        if (poll_wake_) wakes.push_back(std::move(poll_wake_));
        poll_wake_ = nullptr;
        collect_wakes_locked(wakes);
      }
    }
    if (violation) {
      close();
      return std::nullopt;
    }
    if (!wakes.empty() || probe) {
      run(wakes);
      return probe ? std::optional<std::string>("3probe") : std::nullopt;
    }
    if (p->type == wire::eio::Type::Upgrade) return std::nullopt;
  }
  if (via == SioTransport::Polling && on_websocket()) return std::nullopt;  // a late POST: ignored
  switch (p->type) {
    case wire::eio::Type::Close: close(); break;
    case wire::eio::Type::Pong: {
      std::lock_guard lock(mu_);
      pong_due_.reset();
      break;
    }
    // Engine.IO 4 clients answer the server's pings and send none of their own (but the upgrade's
    // probe, above): an echo would be memory any client could make the agent hold. Ignored.
    case wire::eio::Type::Ping: break;
    case wire::eio::Type::Message: on_socketio(p->data); break;
    case wire::eio::Type::Noop: break;
    case wire::eio::Type::Upgrade:  // not on this transport
    case wire::eio::Type::Open: close(); break;
  }
  return std::nullopt;
}

Result<void> SioSession::on_payload(std::string_view body) {
  auto packets = wire::eio::split_payload(body, owner_.options_.max_payload);
  if (!packets) {
    close();
    return packets.error();
  }
  for (auto pk : *packets) {
    if (closed()) break;
    on_packet(pk, SioTransport::Polling);
  }
  return {};
}

void SioSession::on_socketio(std::string_view data) {
  wire::sio::Limits limits;
  limits.max_bytes = owner_.options_.max_payload;
  auto p = wire::sio::parse_packet(data, limits);
  if (!p) {
    close();
    return;
  }
  using wire::sio::Type;
  if (p->nsp != "/") {
    // Only the default namespace is served.
    if (p->type == Type::Connect)
      enqueue({message(wire::sio::encode_connect_error(p->nsp, "Invalid namespace"))}, false);
    return;
  }
  switch (p->type) {
    case Type::Connect: connect(p->data, p->nsp); return;
    case Type::Disconnect: {
      std::optional<std::uint64_t> id;
      {
        std::lock_guard lock(mu_);
        connected_ = false;
        id = hub_id_;
        hub_id_.reset();
      }
      if (id) owner_.hub_.remove(*id);
      return;
    }
    case Type::Event: break;
    case Type::Ack: return;  // we ask for none
    default: close(); return;
  }
  if (!connected()) return;
  const std::string name = p->event();
  std::string_view reply;
  if (name == "request_gpu_update")
    reply = "gpu_status_update";
  else if (name == "request_monitoring_stats")
    reply = "system:metrics_update";
  std::vector<Text> out;
  if (!reply.empty()) {
    auto latest = owner_.agent_.latest();
    const std::string& doc = latest ? *latest->document() : kNull;
    out.push_back(own_message(wire::sio::encode_event(reply, doc)));
    if (p->ack_id) out.push_back(own_message(wire::sio::encode_ack(*p->ack_id, doc)));
  } else if (p->ack_id) {
    const nlohmann::json err{{"error", "unknown event (expected request_gpu_update or request_monitoring_stats)"}};
    out.push_back(own_message(wire::sio::encode_ack(*p->ack_id, err.dump())));
  }
  if (!out.empty()) enqueue(std::move(out), false);
}

void SioSession::connect(const nlohmann::json& auth, const std::string& nsp) {
  if (connected() || closed()) return;
  bool ok = authorized_;
  if (!ok && auth.is_object() && auth.contains("token") && auth["token"].is_string() && owner_.options_.token_ok)
    ok = owner_.options_.token_ok(auth["token"].get_ref<const std::string&>());
  if (!ok) {
    enqueue({message(wire::sio::encode_connect_error(
                nsp, "unauthorized: this agent needs a token (auth {token}, ?token= or Authorization: Bearer)"))},
            false);
    return;
  }
  auto joined = owner_.hub_.add(weak_from_this(), period_);
  if (!joined) {
    enqueue({message(wire::sio::encode_connect_error(nsp, "too many clients"))}, false);
    return;
  }
  std::vector<std::function<void()>> wakes;
  bool raced = false;
  bool overflow = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      raced = true;
    } else {
      hub_id_ = joined->id;
      connected_ = true;
      overflow = !push_locked(message(wire::sio::encode_connect(platform::random_hex(10))), false, true);
      for (const auto& pk : sio_frames(*joined->greeting)) overflow = !push_locked(pk, false, false) || overflow;
      collect_wakes_locked(wakes);
    }
  }
  if (raced) {
    owner_.hub_.remove(joined->id);
    return;
  }
  run(wakes);
  if (overflow) close();
}

bool SioSession::tick(std::chrono::steady_clock::time_point now) {
  std::vector<std::function<void()>> wakes;
  bool close_now = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    const auto& o = owner_.options_;
    if (poll_pending_ || ws_attached_) last_live_ = now;
    if (!connected_ && now - created_ > o.ping_interval + o.ping_timeout) {
      close_now = true;  // never connected (or disconnected and stayed): its place goes back
    } else if (now - last_live_ > 2 * o.ping_interval) {
      close_now = true;  // no GET and no WebSocket for two ping intervals: it holds no connection
    } else if (pong_due_) {
      close_now = now > *pong_due_;  // no pong in time: the client is gone
    } else if (now >= next_ping_) {
      close_now = !push_locked(text("2"), false, true);
      pong_due_ = now + o.ping_timeout;
      next_ping_ = now + o.ping_interval;
      collect_wakes_locked(wakes);
    }
  }
  run(wakes);
  if (close_now) {
    close();
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// SocketIo

SocketIo::SocketIo(WsHub& hub, node::Agent& agent, SioOptions options)
    : hub_(hub), agent_(agent), options_(std::move(options)) {}

SocketIo::~SocketIo() { close_all(); }

Result<std::shared_ptr<SioSession>> SocketIo::open(const OpenRequest& r, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  const std::string bucket = client_bucket(r.address);
  auto& n = per_address_[bucket];
  const auto refuse = [&](std::string message) {
    if (n == 0) per_address_.erase(bucket);
    return make_error(ErrorKind::Unavailable, std::move(message));
  };
  if (n >= options_.max_sessions_per_address) return refuse("too many Socket.IO sessions from this address");
  // A quarter of the client places is kept for /ws (the dashboard's feed): Socket.IO never takes it.
  if (sessions_.size() >= hub_.max_clients() - hub_.max_clients() / 4)
    return refuse("the Socket.IO share of the client places is taken");
  // Sessions that have not connected yet hold a place too, so a burst of handshakes cannot pass the cap.
  std::size_t unjoined = 0;
  for (const auto& [sid, s] : sessions_)
    if (!s->connected()) ++unjoined;
  if (hub_.clients() + unjoined >= hub_.max_clients()) return refuse("the WebSocket client limit is reached");
  std::string sid;
  do sid = platform::random_hex(16);
  while (sessions_.count(sid));
  auto s = std::make_shared<SioSession>(*this, sid, r.address, r.authorized, r.period, r.transport, now);
  sessions_.emplace(sid, s);
  ++n;
  return s;
}

std::shared_ptr<SioSession> SocketIo::find(std::string_view sid) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(std::string(sid));
  return it == sessions_.end() ? nullptr : it->second;
}

void SocketIo::forget(const std::string& sid) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(sid);
  if (it == sessions_.end()) return;
  auto a = per_address_.find(client_bucket(it->second->address()));
  if (a != per_address_.end() && --a->second == 0) per_address_.erase(a);
  sessions_.erase(it);
}

void SocketIo::remove_from_hub_later(std::uint64_t hub_id) {
  std::lock_guard lock(mu_);
  deferred_removals_.push_back(hub_id);
}

void SocketIo::remove_deferred() {
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard lock(mu_);
    ids.swap(deferred_removals_);
  }
  for (auto id : ids) hub_.remove(id);
}

void SocketIo::tick(std::chrono::steady_clock::time_point now) {
  remove_deferred();
  std::vector<std::shared_ptr<SioSession>> all;
  {
    std::lock_guard lock(mu_);
    all.reserve(sessions_.size());
    for (auto& [sid, s] : sessions_) all.push_back(s);
  }
  for (auto& s : all) s->tick(now);
}

bool SocketIo::tick_slice(std::chrono::steady_clock::time_point now, std::size_t slices) {
  if (round_next_ == 0) {
    remove_deferred();
    round_.clear();
    std::lock_guard lock(mu_);
    round_.reserve(sessions_.size());
    for (auto& [sid, s] : sessions_) round_.push_back(s);
  }
  const std::size_t share = (round_.size() + std::max<std::size_t>(slices, 1) - 1) / std::max<std::size_t>(slices, 1);
  const std::size_t end = std::min(round_.size(), round_next_ + share);
  for (; round_next_ < end; ++round_next_)
    if (auto s = round_[round_next_].lock()) s->tick(now);
  if (round_next_ < round_.size()) return false;
  round_next_ = 0;
  round_.clear();
  return true;
}

void SocketIo::close_all() {
  std::vector<std::shared_ptr<SioSession>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [sid, s] : sessions_) all.push_back(s);
  }
  for (auto& s : all) s->close();
  remove_deferred();
}

std::size_t SocketIo::sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace gf::server
