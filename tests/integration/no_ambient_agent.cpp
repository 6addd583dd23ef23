// The integration tests run where a node agent may be listening, if only another test's root
// `gpufleet serve` for a moment on /run/gpufleet/agent.sock: each test talks to the store, or to the
// agent it names itself (GPUFLEET_SOCKET in its fixture), never to one it happens to find. The CLI and
// serve both read GPUFLEET_SOCKET; "none" means no agent socket on either side.
#include <stdlib.h>

namespace {
const bool kNoAmbientAgent = [] { return ::setenv("GPUFLEET_SOCKET", "none", 0) == 0; }();
}  // namespace
