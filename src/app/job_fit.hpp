#pragma once
// The CLI's job record made to fit the agent's limit on a user's job document (issue 20, finding 4:
// node::Arbiter::kMaxUserRecordBytes, measured by wire::job_document_bytes). A long `gpufleet run`
// samples thousands of points per GPU; the record keeps their shape, not every point.
#include <cstddef>

#include "core/job.hpp"

namespace gf::app {

// The budget the CLI fits its records to: the agent's limit less room for what the agent adds (the
// owner's user name and uid, a job id it makes).
std::size_t agent_job_budget();

// Makes job's document at most `limit` bytes, in this order, stopping as soon as it fits:
//   1. a command line past 2 KiB cut to 2 KiB (record and column alike, "command_truncated": true);
//   2. metrics.gpu_monitoring.series thinned to the most evenly spaced points that fit (the first and
//      last of each GPU among them, two at least), noting "series_thinned_from" (the points it had);
//      gpu_stats and sample_count, computed over every sample, are never touched;
//   3. the series left out ("series_omitted" says why);
//   4. error texts cut to 1 KiB each.
// True when the document fits. A record that is not a JSON object is left as it is.
bool fit_job_document(core::Job& job, std::size_t limit);

}  // namespace gf::app
