// One line of text from a cycles_per_packet JSON object (app::cycles_json):
// mrc-gen's summary and `mrcctl status` print the same. Header-only (fmt and
// JSON), so that mrcctl needs no DPDK.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <string>

namespace mrc::app {

inline std::string cycles_text(const nlohmann::json &c) {
    const auto v = [&](const char *k) { return c.value(k, 0.0); };
    return fmt::format(
        "{:.0f} busy = rx_io {:.0f} + rx {:.0f} + timers {:.0f} + app {:.0f} + tx {:.0f} + tx_io "
        "{:.0f} + control {:.0f}; busy {:.0f}% of the worker's time",
        v("busy"), v("rx_io"), v("rx"), v("timers"), v("app"), v("tx"), v("tx_io"), v("control"),
        100 * v("busy_share"));
}

}  // namespace mrc::app
