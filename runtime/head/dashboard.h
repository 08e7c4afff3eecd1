// The head's status page (GET / on `--metrics-port`): the cluster at a
// glance for a person, where /metrics is for Prometheus and /status.json for
// programs. Rendered on the HTTP server's thread from a status snapshot.
#pragma once

#include <string>

#include "spotlight/status.h"

namespace spotlight::head {

// At most this many actors are listed one by one; the rest are counted.
constexpr size_t kDashboardActors = 200;

// A self-contained HTML page (no scripts, reloads itself every few seconds).
std::string dashboard_html(const ClusterStatus& s);

// Text for HTML: & < > " ' escaped (names come from users).
std::string html_escape(const std::string& text);

}  // namespace spotlight::head
