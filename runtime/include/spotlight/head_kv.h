// The head's key-value store as a collective::KvStore: the members of an SP
// group rendezvous through the head they already know, with no other store
// or server. Keys live in the head's memory (a restarted head starts empty;
// groups re-form with a new epoch, whose keys are new).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "spotlight/collective.h"

namespace spotlight {

// A client of the head at `address` ("host:port"). Thread-safe. A request the
// head does not answer within `request_timeout` (beyond a get's own wait)
// throws ConnectionError; one it refuses throws RejectedError.
std::shared_ptr<collective::KvStore> head_kv(const std::string& address,
                                             std::chrono::milliseconds request_timeout = std::chrono::seconds(10));

}  // namespace spotlight
