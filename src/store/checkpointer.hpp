#pragma once
// WAL checkpoints off the request path, for the agent.
//
// SQLite runs a checkpoint inside the commit that takes the WAL past 1000 pages: that commit copies
// the WAL into the database and waits for the disk twice (fdatasync). On an ordinary disk that is
// 5–10 ms, paid by whichever lease or release happens to commit then — about one operation in a
// hundred at the agent's write rate, so it is the p99 of a lease round trip. The agent instead turns
// automatic checkpoints off for its own connections and checkpoints from a thread of its own: commits
// never wait for the disk (synchronous=NORMAL in WAL mode), and the WAL stays short. Every other
// process (a CLI without an agent) keeps SQLite's automatic checkpoints.
//
// When: the thread looks at the WAL file's size every `period` (one stat(2)) and checkpoints when it
// grew by kBurstBytes past the largest it has been (a burst of writes: leases under load), else every
// `idle_period`. A checkpoint that finds new frames costs two fdatasync, an exit to the host on a VM
// (~0.2 ms of the agent's CPU per collection at one a second, bench/RESULTS.md, issue 24 goal 5); the
// agent's steady writes (a history batch every 2 s, a few pages) wait for the idle period, so that is
// also the most that a power loss can take from them. A WAL that SQLite restarts from its beginning
// after a checkpoint does not shrink, so writes up to the largest size seen wait for the idle period.
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
  static Result<std::unique_ptr<WalCheckpointer>> start(
      const std::string& path, std::chrono::milliseconds period = std::chrono::seconds(1),
      std::chrono::milliseconds idle_period = std::chrono::seconds(10));
  // Growth of the WAL file past its largest size that is checkpointed at the next look.
  static constexpr long long kBurstBytes = 1024 * 1024;
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;
  // Stops the thread after one last checkpoint.
  ~WalCheckpointer();

  // Checkpoints done and failed so far (a passive checkpoint that found a reader in the way is done,
  // not failed: it copies what it can and the next one goes on).
  std::size_t done() const;
  std::size_t failed() const;

 private:
  WalCheckpointer(Db db, std::chrono::milliseconds period, std::chrono::milliseconds idle_period);
  void run();
  bool burst();  // the WAL grew by kBurstBytes past wal_high_ (which it updates)
  void checkpoint();

  Db db_;
  const std::chrono::milliseconds period_;
  const std::chrono::milliseconds idle_period_;
  const std::string wal_path_;
  long long wal_high_ = 0;  // the WAL file's largest size at a checkpoint
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::size_t done_ = 0, failed_ = 0;
  bool said_ = false;  // a failure is logged once
  std::thread thread_;
};

}  // namespace gf::store
