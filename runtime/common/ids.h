// Identifiers and small system facts.
#pragma once

#include <cstdint>
#include <string>

namespace spotlight::common {
// 16 random hex characters.
std::string random_id();
std::string hostname();
}  // namespace spotlight::common
