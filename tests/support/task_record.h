// A queued call's record as the head stores it, for tests of the store and
// of the head's state.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "spotlight/codec.h"
#include "store/store.h"

namespace spotlight::testing {

// Call `id` (arrival order `ord`) of client 1 to `mailbox`: add(id).
inline store::TaskRecord task_record(uint64_t id, uint64_t ord, const std::string& mailbox) {
  store::TaskRecord t;
  t.id = id;
  t.ord = ord;
  t.caller = 1;
  t.mailbox = mailbox;
  t.method = "add";
  t.args = Blob{pack(std::make_tuple(int64_t(id)))};
  return t;
}

}  // namespace spotlight::testing
