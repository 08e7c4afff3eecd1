// The subcommands of the `spotlight` CLI; each adds itself to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace spotlight::cli {
void add_head(CLI::App& app);
void add_join(CLI::App& app);
void add_status(CLI::App& app);  // status, drain and stop
void add_bench(CLI::App& app);
CLI::App* add_bench_objects(CLI::App& bench);    // `spotlight bench objects`
CLI::App* add_bench_sp_groups(CLI::App& bench);  // `spotlight bench sp-groups`
CLI::App* add_bench_scale(CLI::App& bench);      // `spotlight bench scale`
CLI::App* add_bench_preempt(CLI::App& bench);    // `spotlight bench preempt`
void add_replay(CLI::App& app);
// --key KEY (or $SPOTLIGHT_CLUSTER_KEY): the cluster key of this command's connections.
void add_key_option(CLI::App* cmd);
CLI::Validator key_validator();  // 64 hex digits or "none"
}  // namespace spotlight::cli
