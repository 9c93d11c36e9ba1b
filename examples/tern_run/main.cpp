// SPDX-License-Identifier: MIT
// tern-run: generate text from a prompt, score a file in bits per byte, or dump logits for given ids (run.cpp).
#include "run.h"
#include "format/temp_file.h"

int main(int argc, char** argv) {
  // --logits-out's temporary is removed on SIGINT, SIGTERM, SIGHUP and SIGQUIT, and a write past `ulimit -f` fails
  // with a message instead of SIGXFSZ.
  tern::remove_temporaries_on_signals();
  tern::report_truncated_mappings("tern-run");
  return tern::run::run_command(argc, argv);
}
