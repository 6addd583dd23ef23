#pragma once
// Placement policy: which GPUs of a node may be offered to a job (eligibility) and which `count` of
// them to offer (select_gpus), preferring well-linked sets the way NVIDIA's go-gpuallocator does.
//
// Pure functions of a snapshot, a topology and a request: no I/O, no clock, no shared state; safe to
// call from any thread. GPUs are named by GpuReading::index everywhere (the topology is indexed the
// same way); refusals and errors are plain sentences meant for the user.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/policy.hpp"
#include "core/result.hpp"
#include "core/snapshot.hpp"
#include "core/topology.hpp"

namespace gf::allocator {

// A need (its mig_profile is select_mig_instance's, not read here) and what the caller knows of the node.
struct SelectRequest {
  core::GpuNeed need;
  std::set<unsigned> leased;         // GPU indices held by leases: never offered
  std::set<std::uint32_t> own_pids;  // processes that do not make a GPU busy (ours)
};

struct Refusal {
  unsigned index = 0;
  // "leased", "lost: GPU is lost", "2048 MiB free < 8000 MiB floor", "utilization 73 % > 50 %",
  // "busy: pid 4242 (python3, alice)"; several reasons are joined with "; ".
  std::string reason;
};

struct Selection {
  std::vector<unsigned> indices;  // ascending
  std::vector<std::string> why;   // one sentence per chosen GPU, in the order of `indices`
  std::vector<Refusal> refused;   // every GPU that was not eligible, ascending index
  std::string method;             // e.g. "topology: NVLink pair" or "availability score"
  double link_score = 0;          // summed pair_link_score over the chosen pairs (0 for one GPU)
};

// A pair's link score, after go-gpuallocator: 100 per NVLink link; without NVLink by the PCIe common
// ancestor: SameBoard 60, SingleSwitch 50, MultiSwitch 40, HostBridge 30, NumaNode 20,
// CrossSocket 10, Unknown 0.
unsigned pair_link_score(const core::Topology& t, unsigned a, unsigned b) noexcept;

// Every pair's pair_link_score on one topology, computed once: a decision then reads a table instead of
// asking the topology twice per pair (a single-GPU decision scores every eligible pair: 32 640 pairs
// at 256 GPUs). For whoever decides many times on one topology (the node's allocator).
class LinkScores {
 public:
  LinkScores() = default;
  explicit LinkScores(const core::Topology& t);
  unsigned operator()(unsigned a, unsigned b) const noexcept {
    return a < n_ && b < n_ ? scores_[static_cast<std::size_t>(a) * n_ + b] : 0;
  }
  unsigned size() const noexcept { return n_; }

 private:
  unsigned n_ = 0;
  std::vector<unsigned> scores_;
};

// Every GPU of the snapshot that may not be offered, with why: lost or failing, leased, under the
// free-memory floor, over the utilization ceiling, or (unless allow_busy) running a process not in
// own_pids. A reading the device could not give refuses the GPU only when its limit constrains
// (unknown free memory with a floor above 0, unknown utilization with a ceiling below 100).
std::vector<Refusal> eligibility(const core::Snapshot& s, const SelectRequest& r);

// Chooses r.need.gpus eligible GPUs.
// count == 1: the GPU whose loss breaks the fewest good links among the eligible GPUs (lowest sum of
//   its link scores to them), so that linked groups stay whole for larger jobs; then the best
//   availability score; then the lowest index.
// count > 1: the set with the highest summed pairwise link score — exhaustively when there are at
//   most kExhaustiveLimit candidate sets, else greedily grown from every eligible GPU and improved by
//   swaps — then the highest summed availability score, then the lowest indices.
// With no topology known, both reduce to "best availability score first". Availability is
// GpuReading::availability_score, computed with core::availability_score when absent.
// Fails when count is 0 or fewer GPUs are eligible than asked; the message says how many were needed
// and gives one line per GPU with why it was refused (or that it was eligible).
// scores: t's LinkScores when the caller keeps them (nullptr: made here, for this decision).
Result<Selection> select_gpus(const core::Snapshot& s, const core::Topology& t, const SelectRequest& r,
                              const LinkScores* scores = nullptr);

// Candidate sets searched exhaustively at most; beyond this the greedy search runs.
inline constexpr std::uint64_t kExhaustiveLimit = 20000;

}  // namespace gf::allocator
