#include "cluster/fleet_refresher.hpp"

#include <gtest/gtest.h>

namespace gf::cluster {
namespace {

core::NodeMetrics agent(std::string url, std::string node, std::string error = "") {
  core::NodeMetrics m;
  m.source = "agent";
  m.agent_url = std::move(url);
  m.node = std::move(node);
  m.error = std::move(error);
  return m;
}

TEST(FleetRefresher, AnUnreachableAgentKeepsTheNodeNameItLastGave) {
  std::unordered_map<std::string, std::string> names;
  core::FleetFacts first;
  first.metrics = {agent("http://10.0.0.1:9401", "gpu-a"), agent("http://10.0.0.2:9401", "gpu-b")};
  remember_agent_names(first, names);
  EXPECT_EQ(first.metrics[0].node, "gpu-a");

  core::FleetFacts second;  // gpu-a's agent stopped: fetch_agents named it by the URL's host
  second.metrics = {agent("http://10.0.0.1:9401", "10.0.0.1", "connection refused"),
                    agent("http://10.0.0.3:9401", "10.0.0.3", "connection refused")};
  remember_agent_names(second, names);
  EXPECT_EQ(second.metrics[0].node, "gpu-a");
  EXPECT_EQ(second.metrics[0].error, "connection refused");  // still reported as unreachable
  EXPECT_EQ(second.metrics[1].node, "10.0.0.3");             // never seen: the host is all we know

  core::FleetFacts third;  // the agent is back under a new --node-name: the new name wins
  third.metrics = {agent("http://10.0.0.1:9401", "gpu-a2")};
  remember_agent_names(third, names);
  core::FleetFacts fourth;
  fourth.metrics = {agent("http://10.0.0.1:9401", "10.0.0.1", "timed out")};
  remember_agent_names(fourth, names);
  EXPECT_EQ(fourth.metrics[0].node, "gpu-a2");
}

TEST(FleetRefresher, PrometheusMetricsAreLeftAlone) {
  std::unordered_map<std::string, std::string> names{{"http://p:9090", "x"}};
  core::FleetFacts f;
  core::NodeMetrics m;
  m.source = "prometheus";
  m.node = "gpu-9";
  m.agent_url = "http://p:9090";
  m.error = "stale";
  f.metrics = {m};
  remember_agent_names(f, names);
  EXPECT_EQ(f.metrics[0].node, "gpu-9");
}

}  // namespace
}  // namespace gf::cluster
