#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

namespace spotlight::common {

void init_logging(const std::string& process_name) {
  auto logger = spdlog::stderr_color_mt(process_name);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e] [%n] [%^%l%$] %v");
  const char* lvl = std::getenv("SPOTLIGHT_LOG");
  spdlog::set_level(lvl ? spdlog::level::from_str(lvl) : spdlog::level::info);
}

}  // namespace spotlight::common
