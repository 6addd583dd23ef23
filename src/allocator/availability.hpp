#pragma once
// Whether a request for GPUs would be served now: the one availability check, used by the agent's
// GET /api/v1/availability and by the tests. Pure, like the rest of allocator/: the caller brings
// the snapshot, the topology and the leased GPUs (SelectRequest::leased); any thread may call it.
#include <optional>
#include <string>
#include <vector>

#include "allocator/select.hpp"

namespace gf::allocator {

struct GpuAvailability {
  const core::GpuReading* gpu = nullptr;  // points into the snapshot given to check_availability
  bool qualifies = false;
  std::string reason;  // why not (empty when it qualifies)
};

struct Availability {
  SelectRequest request;
  unsigned qualifying = 0;
  bool available = false;                 // qualifying >= request.need.gpus
  std::vector<GpuAvailability> gpus;      // in the snapshot's order
  std::optional<Selection> would_choose;  // what select_gpus would give now, when available
};

// Every GPU of `s` judged by eligibility(), and the choice select_gpus would make when enough qualify.
// The result points into `s`: keep the snapshot alive while it is used.
Availability check_availability(const core::Snapshot& s, const core::Topology& t, const SelectRequest& r);

// The check in words: "2 of 4 GPUs qualify, 2 needed (8000 MiB free, at most 50 % busy): available",
// then one indented line per GPU, qualifying GPUs first ("GPU 0 qualifies: …", "GPU 1 does not: …").
std::string describe(const Availability& a);

}  // namespace gf::allocator
