// The process's ZAP handler: ZeroMQ asks it whether a peer that passed the
// CURVE handshake may in. It admits a peer whose public key is the one its
// server socket names as its ZAP domain (cluster_key.h), and nobody else.
#pragma once

namespace spotlight::transport {

// Binds the handler in context() and serves it from a thread of its own;
// idempotent. It ends with the context (terminate_context()).
void start_zap_handler();

}  // namespace spotlight::transport
