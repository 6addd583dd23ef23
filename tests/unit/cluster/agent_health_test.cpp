// The fleet's view of an agent's unhealthy GPUs (issue 21): parse_agent_document keeps the agent's
// verdict, bounded, so that node ranking can skip those GPUs.
#include <gtest/gtest.h>

#include <string>

#include "cluster/agent_source.hpp"

namespace gf::cluster {
namespace {

TEST(AgentHealth, AnUnhealthyGpuKeepsItsFirstProblemBounded) {
  const std::string long_text(5000, 'x');
  const std::string doc = R"J({"node":"n","gpus":[
    {"index":0,"utilization":0,"memory":{"total":100,"used":0},"healthy":true,"health_problems":[]},
    {"index":1,"utilization":0,"memory":{"total":100,"used":0},"healthy":false,
     "health_problems":[{"code":"xid_79","message":"GPU 1 had XID 79 (GPU has fallen off the bus)"}]},
    {"index":2,"utilization":0,"memory":{"total":100,"used":0},"healthy":false,"health_problems":[{"message":")J" +
                          long_text + R"J("}]},
    {"index":3,"utilization":0,"memory":{"total":100,"used":0},"healthy":false,"health_problems":"garbage"},
    {"index":4,"utilization":0,"memory":{"total":100,"used":0}}]})J";
  auto m = parse_agent_document(doc, "http://n:9401");
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->gpus.size(), 5u);
  EXPECT_TRUE(m->gpus[0].unhealthy.empty());
  EXPECT_EQ(m->gpus[1].unhealthy, "XID 79 (GPU has fallen off the bus)");  // in a few words, from its code
  EXPECT_EQ(m->gpus[2].unhealthy.size(), 200u);                            // another machine's text, bounded
  EXPECT_EQ(m->gpus[3].unhealthy, "unhealthy");                            // no usable sentence: still unhealthy
  EXPECT_TRUE(m->gpus[4].unhealthy.empty());                               // an older agent says nothing: not judged
}

}  // namespace
}  // namespace gf::cluster
