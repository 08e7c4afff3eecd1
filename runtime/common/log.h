// Logging set-up: spdlog to stderr, level from SPOTLIGHT_LOG (trace..off, default info).
#pragma once

#include <string>

namespace spotlight::common {
void init_logging(const std::string& process_name);
}
