#pragma once
// Reading one checked field of a decoded JSON object, for the decoders of requests (the agent socket's,
// the GPU need's): the sentence of a refusal names the key. Pure; safe on any input.
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/result.hpp"

namespace gf::wire {

// An integer (a JSON integer, or a float with no fraction) within [lo, hi]; def when absent. Invalid:
// "KEY must be an integer", "KEY must be an integer from LO to HI" (a fraction), "KEY must be from LO to HI
// (got N)".
Result<std::int64_t> json_int(const nlohmann::json& j, const char* key, std::int64_t def, std::int64_t lo,
                              std::int64_t hi);

}  // namespace gf::wire
