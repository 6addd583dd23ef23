#pragma once
// The server tests use the shared agent rig (tests/support/agent_rig.hpp) under their old names.
#include "support/agent_rig.hpp"

namespace gf::server::testing {

using test::AgentRig;
using test::eventually;
using test::TempDir;

}  // namespace gf::server::testing
