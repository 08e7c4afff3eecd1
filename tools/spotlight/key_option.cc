// --key: the cluster key a command's connections use (transport/cluster_key.h).
#include "tools/spotlight/commands.h"
#include "transport/cluster_key.h"

namespace spotlight::cli {

CLI::Validator key_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          transport::ClusterKey::parse(text);
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "KEY");
}

void add_key_option(CLI::App* cmd) {
  // Not CLI11's envname: with it the environment's value would win over the
  // option's. Without the option, process_key() reads the environment itself.
  cmd->add_option("--key",
                  "Cluster key: 64 hex digits, as `spotlight head` printed it (default: "
                  "$SPOTLIGHT_CLUSTER_KEY)")
      ->check(key_validator())
      ->each([](const std::string& text) {
        transport::set_process_key(transport::ClusterKey::parse(text));
      });
}

}  // namespace spotlight::cli
