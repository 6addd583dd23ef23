#include "app/node_link.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "app/agent_client.hpp"
#include "app/job_fit.hpp"
#include "app/jobs.hpp"
#include "platform/log.hpp"
#include "wire/agent_docs.hpp"
#include "wire/agent_protocol.hpp"
#include "wire/gpu_need.hpp"
#include "wire/json.hpp"

namespace gf::app {
namespace {

class StoreLink final : public NodeLink {
 public:
  explicit StoreLink(JobContext jc) : jc_(std::move(jc)) {}
  Context& node() override { return jc_.node; }
  Result<void> put_job(core::Job& job) override { return jc_.store->put_job(job); }
  Result<Grant> acquire(const scheduler::AllocationRequest& req, const scheduler::WaitOptions& wo) override {
    auto got = jc_.allocator->wait_and_allocate(req, jc_.query, wo);
    if (!got) return got.error();
    return Grant{got->lease, got->selection.indices,
                 wire::gpu_info_json(got->selection, *got->snapshot, req.need.gpus)};
  }
  Result<bool> release(const std::string& lease_id, const std::string& reason) override {
    return jc_.store->release(lease_id, reason);
  }

 private:
  JobContext jc_;
};

// The lease is tied to this connection: it ends when we close it, or when this process dies.
class AgentLink final : public NodeLink {
 public:
  AgentLink(Context node, AgentClient client) : node_(std::move(node)), client_(std::move(client)) {}
  ~AgentLink() override { command_ended(); }
  Context& node() override { return node_; }

  Result<void> put_job(core::Job& job) override {
    if (lost_) return make_error(fmt::format("the connection to the agent at {} was lost", client_.path()));
    // The agent keeps at most 16 KiB of a user's job (node::Arbiter::kMaxUserRecordBytes), well under
    // the socket's 64 KiB request line: a long run's sample series is thinned to fit (app/job_fit.hpp).
    // What the agent keeps is fitted; this process's own copy (printed by --json) stays whole. One that
    // cannot be made to fit is sent as it is, and the agent's refusal says why.
    core::Job sent = job;
    (void)fit_job_document(sent, agent_job_budget());
    auto r = client_.call("job_put", {{"job", wire::job_to_json(sent)}});
    if (!r) return r.error();
    if (auto id = r->find("job_id"); id != r->end() && id->is_string()) job.id = id->get<std::string>();
    return {};
  }

  Result<Grant> acquire(const scheduler::AllocationRequest& req, const scheduler::WaitOptions& wo) override {
    nlohmann::json args = wire::gpu_need_json(req.need);
    args["name"] = req.name;
    args["job_id"] = req.job_id;
    args["priority"] = req.priority;
    args["wait_s"] = std::chrono::duration<double>(wo.timeout).count();
    args["tie"] = "connection";
    auto on_event = [&wo](const nlohmann::json& e) {
      if (!wo.progress || e.value("event", "") != "waiting") return;
      scheduler::WaitProgress p;
      if (auto w = e.find("waited_s"); w != e.end() && w->is_number())
        p.waited = std::chrono::milliseconds(static_cast<long long>(w->get<double>() * 1000.0));
      if (auto y = e.find("why"); y != e.end() && y->is_string()) p.why_not = y->get<std::string>();
      if (auto a = e.find("ahead"); a != e.end() && a->is_number_unsigned()) p.ahead = a->get<std::size_t>();
      if (auto h = e.find("holders"); h != e.end() && h->is_array())
        for (const auto& l : *h)
          if (auto lease = wire::lease_from_json(l)) p.holders.push_back(std::move(*lease));
      wo.progress(p);
    };
    auto r = client_.call("acquire", std::move(args), on_event, wo.cancel);
    if (!r) return r.error();
    auto lease = wire::lease_from_json(r->value("lease", nlohmann::json()));
    if (!lease) return lease.error();
    Grant g{std::move(*lease), {}, r->value("gpu_info", nlohmann::json::object())};
    for (const auto& gpu : g.lease.gpus) g.indices.push_back(gpu.index);
    return g;
  }

  Result<bool> release(const std::string& lease_id, const std::string&) override {
    if (lost_) return false;  // the agent ended the lease with the connection
    client_.ending(lease_id);
    auto r = client_.call("release", {{"lease", lease_id}});
    if (!r) return r.error();
    return true;
  }

  void command_started(const std::string& job_id) override {
    stop_.store(false);
    watcher_ = std::thread([this, job_id] {
      if (!client_.watch_until(stop_)) {
        lost_ = true;
        std::fprintf(stderr,
                     "gpufleet: the connection to the agent at %s dropped while job %s runs: the job goes on, "
                     "without a lease\n",
                     platform::escape_control(client_.path()).c_str(), job_id.c_str());
      }
    });
  }
  void command_ended() override {
    stop_.store(true);
    if (watcher_.joinable()) watcher_.join();
  }

 private:
  Context node_;
  AgentClient client_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> lost_{false};
  std::thread watcher_;
};

}  // namespace

Result<std::unique_ptr<NodeLink>> open_node_link(const GlobalOptions& g, const std::string& db) {
  auto agent = connect_agent(g, db);
  if (!agent) return agent.error();
  if (!*agent) {
    auto jc = open_job_context(g, db);
    if (!jc) return jc.error();
    return std::unique_ptr<NodeLink>(std::make_unique<StoreLink>(std::move(*jc)));
  }
  Context node = open_context(g);
  if (node.explicit_backend_failed) {
    std::string why;
    for (const auto& l : describe_steps(node.steps)) why += (why.empty() ? "" : "; ") + l;
    return make_error(ErrorKind::Unsupported, why);
  }
  return std::unique_ptr<NodeLink>(std::make_unique<AgentLink>(std::move(node), std::move(**agent)));
}

}  // namespace gf::app
