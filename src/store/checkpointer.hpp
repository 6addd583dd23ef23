#pragma once
// WAL checkpoints off the request path, for the agent.
//
// SQLite runs a checkpoint inside the commit that takes the WAL past 1000 pages: that commit copies
// the WAL into the database and waits for the disk twice (fdatasync). On an ordinary disk that is
// 5–10 ms, paid by whichever lease or release happens to commit then — about one operation in a
// hundred at the agent's write rate, so it is the p99 of a lease round trip. The agent instead turns
// automatic checkpoints off for its own connections and checkpoints from a thread of its own, every
// second: commits never wait for the disk (synchronous=NORMAL in WAL mode), and the WAL stays short.
// Every other process (a CLI without an agent) keeps SQLite's automatic checkpoints.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/result.hpp"
#include "store/sqlite.hpp"

namespace gf::store {

class WalCheckpointer {
 public:
  // Opens its own connection to the store at path and starts the thread. While it runs, connections
  // this process opens (Db::open) leave checkpoints to it; they go back to automatic ones when it
  // stops. Connections opened before it keep theirs: start it before opening the stores.
  static Result<std::unique_ptr<WalCheckpointer>> start(const std::string& path,
                                                        std::chrono::milliseconds period = std::chrono::seconds(1));
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;
  // Stops the thread after one last checkpoint.
  ~WalCheckpointer();

  // Checkpoints done and failed so far (a passive checkpoint that found a reader in the way is done,
  // not failed: it copies what it can and the next one goes on).
  std::size_t done() const;
  std::size_t failed() const;

 private:
  WalCheckpointer(Db db, std::chrono::milliseconds period);
  void run();
  void checkpoint();

  Db db_;
  const std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::size_t done_ = 0, failed_ = 0;
  bool said_ = false;  // a failure is logged once
  std::thread thread_;
};

}  // namespace gf::store
