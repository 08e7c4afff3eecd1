// spotlight: head | join | status | drain | stop | bench | replay
#include <iostream>

#include "tools/spotlight/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Spotlight: a spot-tolerant actor runtime for DiT RL post-training"};
  app.require_subcommand(1);
  spotlight::cli::add_head(app);
  spotlight::cli::add_join(app);
  spotlight::cli::add_status(app);
  spotlight::cli::add_bench(app);
  spotlight::cli::add_replay(app);
  auto known = [&](const char* name) {
    try {
      return app.get_subcommand(name) != nullptr;
    } catch (const CLI::OptionNotFound&) {
      return false;
    }
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    std::cerr << "spotlight: unknown command '" << argv[1] << "' (try --help)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // prints the reason and usage; exit code 2 style for bad arguments
  } catch (const std::exception& e) {
    std::cerr << "spotlight: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
