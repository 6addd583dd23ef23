#include "server/ws_hub.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "wire/alert_json.hpp"
#include "wire/ws_frame.hpp"

namespace gf::server {

bool OutboundQueue::push(Text text, bool droppable, bool charged) {
  const std::size_t size = text ? text->size() : 0;
  while (items_.size() >= capacity_ || bytes_ + size > max_bytes_) {
    auto victim = std::find_if(items_.begin(), items_.end(), [](const Item& i) { return i.droppable; });
    if (victim == items_.end()) {
      // Full of what may not be dropped: the client does not read (an update cannot push out a reply
      // either). Only an update too large for the whole budget on its own is dropped instead.
      if (!droppable || !items_.empty()) return false;
      ++dropped_;
      return true;
    }
    erase(victim);
    ++dropped_;
  }
  bytes_ += size;
  if (charged) charged_bytes_ += size;
  items_.push_back({std::move(text), droppable, charged});
  return true;
}

void OutboundQueue::erase(std::deque<Item>::iterator it) {
  const std::size_t size = it->text ? it->text->size() : 0;
  bytes_ -= size;
  if (it->charged) charged_bytes_ -= size;
  items_.erase(it);
}

std::optional<Text> OutboundQueue::pop() {
  if (items_.empty()) return std::nullopt;
  Text t = std::move(items_.front().text);
  const std::size_t size = t ? t->size() : 0;
  bytes_ -= size;
  if (items_.front().charged) charged_bytes_ -= size;
  items_.pop_front();
  return t;
}

void OutboundQueue::clear() {
  items_.clear();
  bytes_ = 0;
  charged_bytes_ = 0;
}

namespace {

Message::Frames frame_ws(const Message& m) {
  std::string out;
  out.reserve(m.data().size() + m.event().size() + 24);
  out += R"({"event":")";
  out += m.event();
  out += R"(","data":)";
  out += m.data();
  out += '}';
  // Shared: a deflate connection finds the frame's deflated form with it, made once for all (ws_link.cpp).
  return {wire::ws::shared_text(std::move(out))};
}

Text json_text(const nlohmann::json& j) { return std::make_shared<const std::string>(j.dump()); }

MessagePtr reply(std::string event, const nlohmann::json& data) {
  return std::make_shared<const Message>(std::move(event), json_text(data));
}

}  // namespace

const Text& ws_frame(const Message& m) { return m.framed(Message::Framing::WebSocket, frame_ws).front(); }

WsHub::WsHub(node::Agent& agent, sampler::SampleHub& hub, WsOptions options)
    : agent_(agent), hub_(hub), options_(options) {}

WsHub::~WsHub() { close_all(); }

void WsHub::close_all() {
  std::vector<sampler::SampleHub::Subscription> subs;
  {
    std::lock_guard lock(mu_);
    for (auto& [p, g] : groups_) subs.push_back(std::move(g.sub));
    groups_.clear();
    clients_.clear();
  }
  subs.clear();  // unsubscribes, outside the lock (a tick may be waiting for it)
}

std::chrono::milliseconds WsHub::clamp_period(std::chrono::milliseconds p) const {
  using std::chrono::milliseconds;
  if (p < options_.min_period) p = options_.min_period;
  if (p > options_.max_period) p = options_.max_period;
  // Rounded to 100 ms so that clients share groups (and aligned ticks share driver queries).
  const auto r = milliseconds((p.count() + 50) / 100 * 100);
  return r < options_.min_period ? options_.min_period : r;
}

void WsHub::join_group_locked(std::uint64_t id, std::chrono::milliseconds period,
                              std::vector<sampler::SampleHub::Subscription>& to_reset) {
  (void)to_reset;
  auto [it, created] = groups_.try_emplace(period);
  it->second.members.insert(id);
  if (created) {
    // Aligned: a 1 s group ticks with the agent's own 1 s loop, on the same driver query. The first
    // tick comes on the next grid point, not at once (the client just got gpu_status).
    it->second.sub = hub_.subscribe(
        period, [this, period](const Result<core::SnapshotPtr>& s, auto) { on_group_tick(period, s); }, true);
  }
}

void WsHub::leave_group_locked(std::uint64_t id, std::chrono::milliseconds period,
                               std::vector<sampler::SampleHub::Subscription>& to_reset) {
  auto it = groups_.find(period);
  if (it == groups_.end()) return;
  it->second.members.erase(id);
  if (it->second.members.empty()) {
    to_reset.push_back(std::move(it->second.sub));
    groups_.erase(it);
  }
}

std::optional<WsHub::Joined> WsHub::add(std::weak_ptr<WsClient> client,
                                        std::optional<std::chrono::milliseconds> period) {
  std::vector<sampler::SampleHub::Subscription> to_reset;
  Joined j{};
  {
    std::lock_guard lock(mu_);
    if (clients_.size() >= options_.max_clients) return std::nullopt;
    j.id = next_id_++;
    const auto p = clamp_period(period.value_or(options_.default_period));
    clients_.emplace(j.id, Client{std::move(client), p});
    join_group_locked(j.id, p, to_reset);
  }
  static const auto no_reading = std::make_shared<const Message>("gpu_status", json_text(nullptr));
  auto latest = agent_.latest();
  j.greeting = latest ? latest->renderings->status_message() : no_reading;
  return j;
}

void WsHub::remove(std::uint64_t id) {
  std::vector<sampler::SampleHub::Subscription> to_reset;
  {
    std::lock_guard lock(mu_);
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    leave_group_locked(id, it->second.period, to_reset);
    clients_.erase(it);
  }
  to_reset.clear();  // outside the lock: unsubscribing waits for a tick in flight
}

std::size_t WsHub::clients() const {
  std::lock_guard lock(mu_);
  return clients_.size();
}

std::optional<MessagePtr> WsHub::on_message(std::uint64_t id, std::string_view text) {
  auto error = [](const std::string& message) { return reply("error", nlohmann::json{{"message", message}}); };
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("event") || !j["event"].is_string())
    return error(R"(expected a JSON object {"event": name, "data": …})");
  const std::string event = j["event"].get<std::string>();
  if (event == "request_gpu_update") {
    auto latest = agent_.latest();
    if (!latest) return error("no reading yet");
    return latest->renderings->update_message();
  }
  if (event == "set_period") {
    const auto data = j.value("data", nlohmann::json::object());
    if (!data.is_object() || !data.contains("period_ms") || !data["period_ms"].is_number())
      return error(R"(set_period needs {"data": {"period_ms": N}})");
    const double ms = data["period_ms"].get<double>();
    if (!(ms > 0) || ms > 1e9) return error("period_ms must be a positive number of milliseconds");
    const auto p = clamp_period(std::chrono::milliseconds(static_cast<std::int64_t>(ms)));
    std::vector<sampler::SampleHub::Subscription> to_reset;
    {
      std::lock_guard lock(mu_);
      auto it = clients_.find(id);
      if (it == clients_.end()) return std::nullopt;
      if (it->second.period != p) {
        leave_group_locked(id, it->second.period, to_reset);
        it->second.period = p;
        join_group_locked(id, p, to_reset);
      }
    }
    to_reset.clear();
    return reply("period", nlohmann::json{{"period_ms", p.count()}});
  }
  return error("unknown event '" + event + "' (expected request_gpu_update or set_period)");
}

void WsHub::broadcast(const Message& message) {
  std::vector<std::shared_ptr<WsClient>> targets;
  {
    std::lock_guard lock(mu_);
    targets.reserve(clients_.size());
    for (auto& [id, c] : clients_)
      if (auto l = c.link.lock()) targets.push_back(std::move(l));
  }
  for (auto& t : targets) t->send(message);
}

void WsHub::broadcast(std::string_view event, const nlohmann::json& data) {
  broadcast(Message(std::string(event), json_text(data)));
}

void WsHub::broadcast_alerts(const std::vector<core::AlertEvent>& events) {
  for (const auto& e : events)
    broadcast(Message(std::string(core::event_name(e.alert.kind)), json_text(wire::alert_json(e.alert))));
}

void WsHub::on_group_tick(std::chrono::milliseconds period, const Result<core::SnapshotPtr>& s) {
  if (!s) return;  // the agent counts and reports collection errors; clients keep the last update
  std::vector<std::shared_ptr<WsClient>> targets;
  {
    std::lock_guard lock(mu_);
    auto g = groups_.find(period);
    if (g == groups_.end()) return;
    targets.reserve(g->second.members.size());
    for (auto id : g->second.members)
      if (auto c = clients_.find(id); c != clients_.end())
        if (auto l = c->second.link.lock()) targets.push_back(std::move(l));
  }
  if (targets.empty()) return;
  // One update message per reading, shared by every group of the tick (and framed once per transport).
  const auto renderings = agent_.renderings_of(*s);
  const Message& update = *renderings->update_message();
  for (auto& t : targets) t->send(update);
}

}  // namespace gf::server
