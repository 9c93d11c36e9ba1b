// SPDX-License-Identifier: MIT
// Running a built tool (tern-convert, tern-run, tern-bench) as a child process the way a hostile input would meet
// it: under a 20 s timeout and a 4 GiB address-space limit, stdout and stderr to files, default signal
// dispositions. tests/test_convert_hostile.cpp and tests/test_tern_run_cli.cpp use it.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace tern::test {

constexpr int kToolTimeoutSeconds = 20;

struct ToolRun {
  bool timed_out = false;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string out;     // stdout (when it went to a file)
  std::string err;     // stderr
};

struct ToolLimits {
  rlim_t file_size = RLIM_INFINITY;  // ulimit -f, in bytes
  rlim_t stack = RLIM_INFINITY;      // ulimit -s, in bytes (RLIM_INFINITY: as inherited)
};

// Starts `binary` with `args`, stdout to out_path ("": /dev/null), stderr to err_path, under the address-space limit
// (not in AddressSanitizer builds, whose shadow memory cannot start under it) and `limits`.
pid_t spawn_tool(const std::string& binary, const std::vector<std::string>& args, const std::string& out_path,
                 const std::string& err_path, const ToolLimits& limits = {});
// Waits at most timeout_s for the child (then SIGKILLs it and says timed_out), and reads what it wrote.
ToolRun wait_for_tool(pid_t pid, const std::string& out_path, const std::string& err_path,
                      int timeout_s = kToolTimeoutSeconds);
// spawn_tool + wait_for_tool, stdout and stderr in `scratch`.
ToolRun run_tool(const std::string& binary, const std::vector<std::string>& args, const std::string& scratch,
                 const ToolLimits& limits = {});
// run_tool for a program of the build machine (node, python3 computing expected values): never through a cross
// build's emulator.
ToolRun run_build_machine_program(const std::string& program, const std::vector<std::string>& args,
                                  const std::string& scratch);
// A tool of the build tree, `built` relative to it ("examples/tern-run "), as a shell command's first words. In a cross build the tools are the target's binaries,
// which this machine runs only through the emulator (CMAKE_CROSSCOMPILING_EMULATOR, e.g. qemu-aarch64 -L SYSROOT):
// then the emulator comes first. spawn_tool starts the tools the same way, and allows them more time there.
std::string tool_command(const std::string& built);
// Whether spawn_tool limits the address space (false under AddressSanitizer).
bool tool_address_space_limited();
// Whether the child has ended, without reaping it (wait_for_tool does that).
bool has_exited(pid_t pid);

}  // namespace tern::test
