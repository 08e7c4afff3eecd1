// Watches a socket's handshakes through ZeroMQ's socket monitor, so that a
// peer refused for its cluster key is seen: the head counts and logs such
// peers, and a client or node that is refused says why instead of waiting.
#pragma once

#include <string>
#include <zmq.hpp>

namespace spotlight::transport {

//
// libzmq sends its events to the monitor with a blocking send: were they to
// pile up unread, or go to a reader that is gone, its I/O thread would stop,
// and with it every socket of the process. So a monitor is read while it
// lives, and stop() (or the destructor) ends it BEFORE the watched socket
// closes, from a thread that may use that socket (or under its lock).
class HandshakeMonitor {
 public:
  // Watches `watched` from now on (the socket, not this object, moved or not).
  explicit HandshakeMonitor(zmq::socket_t& watched);
  ~HandshakeMonitor();
  HandshakeMonitor(const HandshakeMonitor&) = delete;
  HandshakeMonitor& operator=(const HandshakeMonitor&) = delete;
  // Ends the watch: libzmq sends nothing more.
  void stop();

  // Reads the events waiting (without blocking) and counts them; returns
  // the failures among them.
  uint64_t drain();
  // True when the last drain() took the failure count to 1, 2, 4, 8...: when
  // to log, so that a peer retrying with the wrong key does not flood the log.
  bool log_due() const { return log_due_; }
  // True when the peer has refused us for good (drain() updates it): it said why (a protocol or
  // authentication failure; libzmq does not even retry those), or it closed
  // three handshakes in a row without a word.
  bool refused() const { return in_a_row_ > 0 && (definite_ || in_a_row_ >= 3); }
  // Failures seen so far.
  uint64_t failed() const { return failed_; }
  // What the last failure means, in words.
  const std::string& last_failure() const { return last_failure_; }
  // The error a client refused by `server` (e.g. "the head at HOST:PORT") gives.
  std::string refused_by(const std::string& server) const;

  zmq::socket_t& socket() { return events_; }

 private:
  void* watched_;  // the socket's handle: the same when the zmq::socket_t is moved
  zmq::socket_t events_;
  int in_a_row_ = 0;
  bool definite_ = false;  // the last failure said why
  uint64_t failed_ = 0;
  bool log_due_ = false;
  std::string last_failure_;
};

}  // namespace spotlight::transport
