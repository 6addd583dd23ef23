#pragma once
// FairQueue: work queued under keys (the agent socket's uids) and taken one item per key in turn, so a
// key with a thousand items waiting delays another key's one item by at most one item of its own.
// Within a key, items come out in the order they went in. Not thread-safe: the caller locks.
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <utility>

namespace gf::server {

template <class Key, class Item>
class FairQueue {
 public:
  void push(const Key& key, Item item) {
    auto& q = items_[key];
    if (q.empty()) turns_.push_back(key);
    q.push_back(std::move(item));
    ++size_;
  }

  // The next key's oldest item, or nullopt when empty. A key with more left goes to the back of the turn.
  std::optional<std::pair<Key, Item>> pop() {
    if (turns_.empty()) return std::nullopt;
    Key key = turns_.front();
    turns_.pop_front();
    auto it = items_.find(key);
    std::optional<std::pair<Key, Item>> out(std::in_place, key, std::move(it->second.front()));
    it->second.pop_front();
    if (it->second.empty())
      items_.erase(it);
    else
      turns_.push_back(key);
    --size_;
    return out;
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Items waiting under one key.
  std::size_t size(const Key& key) const {
    auto it = items_.find(key);
    return it == items_.end() ? 0 : it->second.size();
  }

 private:
  std::map<Key, std::deque<Item>> items_;  // only keys with items
  std::deque<Key> turns_;                  // each key with items once, in the order they are served
  std::size_t size_ = 0;
};

}  // namespace gf::server
