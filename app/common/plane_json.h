// One plane (port) of a running dataplane as JSON: the fields mrc-gen's
// summary and mrcd's `mrcctl ports` share. Each adds its own (mrc-gen: the
// cut; mrcd: address, health, EV gauges).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "dpdk/dataplane.h"

namespace mrc::app {

nlohmann::json plane_json(dp::Dataplane &dp, const dp::WorkerSnapshot &totals, uint8_t plane);

// Cycles per packet from worker counters (dp::cycles_per_packet), with the
// TSC rate they count in: mrc-gen's summary and `mrcctl status` share it.
nlohmann::json cycles_json(const dp::WorkerCounters &c);

}  // namespace mrc::app
