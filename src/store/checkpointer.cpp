#include "store/checkpointer.hpp"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdio>

namespace gf::store {

Result<std::unique_ptr<WalCheckpointer>> WalCheckpointer::start(const std::string& path,
                                                                std::chrono::milliseconds period,
                                                                std::chrono::milliseconds idle_period) {
  auto db = Db::open(path);
  if (!db) return db.error();
  return std::unique_ptr<WalCheckpointer>(new WalCheckpointer(std::move(*db), period, idle_period));
}

WalCheckpointer::WalCheckpointer(Db db, std::chrono::milliseconds period, std::chrono::milliseconds idle_period)
    : db_(std::move(db)), period_(period), idle_period_(idle_period), wal_path_(db_.path() + "-wal") {
  thread_ = std::thread([this] { run(); });
  set_automatic_checkpoints(false);  // only once the thread runs: a thread that cannot start leaves them on
}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  set_automatic_checkpoints(true);
  checkpoint();  // what the last commits left in the WAL
}

std::size_t WalCheckpointer::done() const {
  std::lock_guard l(mu_);
  return done_;
}

std::size_t WalCheckpointer::failed() const {
  std::lock_guard l(mu_);
  return failed_;
}

void WalCheckpointer::run() {
  using Clock = std::chrono::steady_clock;
  auto last = Clock::now();
  std::unique_lock l(mu_);
  while (!cv_.wait_for(l, period_, [this] { return stop_; })) {
    l.unlock();
    if (burst() || Clock::now() - last >= idle_period_) {
      checkpoint();
      last = Clock::now();
    }
    l.lock();
  }
}

bool WalCheckpointer::burst() {
  struct stat st {};
  if (::stat(wal_path_.c_str(), &st) != 0) return false;  // no WAL yet: nothing to copy
  const long long size = st.st_size;
  if (size < wal_high_ + kBurstBytes) return false;
  wal_high_ = size;
  return true;
}

void WalCheckpointer::checkpoint() {
  // PASSIVE: never waits for readers or writers; copies the frames no reader still needs.
  const int rc = sqlite3_wal_checkpoint_v2(db_.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  std::lock_guard l(mu_);
  if (rc == SQLITE_OK || rc == SQLITE_BUSY) {
    ++done_;
    return;
  }
  ++failed_;
  if (!said_) {
    said_ = true;
    std::fprintf(stderr, "gpufleet: WAL checkpoint of %s failed: %s (retried every %lld ms)\n", db_.path().c_str(),
                 db_.error().c_str(), static_cast<long long>(period_.count()));
  }
}

}  // namespace gf::store
