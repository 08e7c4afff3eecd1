// The kernel's own ceiling under ZeroMQ's: bare TCP request/reply on
// loopback, so that `spotlight bench` can say how much of a synchronous
// call's time is the machine's and how much is ours.
#pragma once

namespace spotlight::bench {

// Round trips per second of a 32-byte request and its 32-byte reply between
// two threads over one loopback TCP connection (blocking sockets,
// TCP_NODELAY), one at a time: what any socket transport between two
// endpoints on this machine can reach at best. Throws std::system_error if a
// socket call fails.
double tcp_roundtrips(int n);

}  // namespace spotlight::bench
