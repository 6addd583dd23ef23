#pragma once
// Alerts out: the API's and the WebSocket's alert messages (the config's "alerts" section in is
// config/alert_config.hpp). Pure functions: no I/O, numbers locale-independent.
#include <nlohmann/json.hpp>

#include "core/alerts.hpp"

namespace gf::wire {

// An alert as the API and the WebSocket show it:
// {"id","kind" (event name),"gpu_index","gpu_uuid" (null when unknown),"severity","message","value",
//  "threshold","state": "firing"|"resolved","started_at","resolved_at" (ISO 8601, null while firing)};
// throttling alerts add "reasons": the names of the reason bits in value.
nlohmann::json alert_json(const core::Alert& a);

// The WebSocket message of an event: {"event": "<event name>", "data": alert_json(alert)}.
nlohmann::json alert_event_json(const core::AlertEvent& e);

}  // namespace gf::wire
