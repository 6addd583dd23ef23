#pragma once
// The fleet's GPU metrics straight from gpufleet agents: each agent's GET /api/v1/monitoring/gpu-metrics,
// all fetched concurrently with a per-agent timeout. An agent that cannot be reached (or answers
// something unusable) makes its node "no metrics" with the reason; it never fails the whole query.
// The agent list and the document parsers are pure functions (fuzzed); only fetch_agents does I/O.
// Thread-safety: every function may be called from any number of threads.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "core/fleet.hpp"
#include "core/result.hpp"

namespace gf::cluster {

// An agents file: one base URL per line (http:// or https://), '#' starts a comment, blank lines are
// skipped. A bad line is an error naming `source` and the line number. Duplicates are kept once.
Result<std::vector<std::string>> parse_agent_list(std::string_view text, std::string_view source);
// Checks one base URL (as given with --agent) and returns it without trailing slashes.
Result<std::string> normalize_agent_url(std::string_view url);
// The host of an http(s) URL ("gpu-1" of "http://gpu-1:9401/x", "::1" of "http://[::1]:9401").
std::string url_host(std::string_view url);

// Parses an agent's gpu-metrics document. The node is the document's "node" key (the agent's
// --node-name), else the URL's host; agent_url is base_url without userinfo (platform::url_for_display).
// The document is read by wire::node_metrics_from_gpu_metrics (its keys from the field table, its
// timestamp by wire::parse_iso8601); gpu_resource is the Kubernetes resource of the agent's backend (the
// backend registry's column). Errors name what is wrong; never throws.
Result<core::NodeMetrics> parse_agent_document(std::string_view body, std::string_view base_url);

// One NodeMetrics per agent, in the order given (source "agent", agent_url set). An agent that fails
// has `error` set and no GPUs; its node is the URL's host. A URL's userinfo goes with its request and
// appears in neither agent_url nor error.
std::vector<core::NodeMetrics> fetch_agents(const std::vector<std::string>& base_urls,
                                            std::chrono::milliseconds timeout);

}  // namespace gf::cluster
