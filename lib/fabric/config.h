// mrc-fabric's configuration file (TOML), read into a FabricConfig.
//
//   paths = 4            # per plane
//   seed = 1
//   [[impair]]           # a Setting: selector keys and parameters
//   plane = 0
//   dir = "ab"
//   loss = 0.01
//   [[schedule]]         # an Event: at_ms (or at_us) and a Setting
//   at_ms = 500
//   plane = 1
//   down = true
//
// Every error names the file, the table and the key.
#pragma once

#include <string>

#include "common/result.h"
#include "fabric/fabric.h"

namespace mrc::fabric {

// Reads `path` over `base` (whose planes the caller knows from its ports):
// top-level keys replace base's, [[impair]] and [[schedule]] tables are
// appended to its settings and schedule. Nothing is checked against the
// plane count here: Fabric::create does that.
Result<FabricConfig> load_config(const std::string &path, FabricConfig base);

// The same from TOML text (for tests); `name` is used in messages.
Result<FabricConfig> parse_config(const std::string &text, const std::string &name,
                                  FabricConfig base);

}  // namespace mrc::fabric
