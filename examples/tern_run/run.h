// SPDX-License-Identifier: MIT
// tern-run as a function: parses argv, runs what it asks, prints as the tool does; returns the exit status.
#pragma once

namespace tern::run {

// 0 on success (or --help, --version), 2 for a bad command line, 1 for any other error; never throws.
int run_command(int argc, char** argv);

}  // namespace tern::run
