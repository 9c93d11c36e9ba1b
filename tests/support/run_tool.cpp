// SPDX-License-Identifier: MIT
#include "run_tool.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "test_support.h"

namespace tern::test {
namespace {

constexpr rlim_t kAddressSpace = rlim_t(4) << 30;

// The cross build's emulator and its arguments, space-separated (tests/CMakeLists.txt), or "".
#if defined(TERN_TOOL_LAUNCHER)
constexpr const char* kLauncher = TERN_TOOL_LAUNCHER;
constexpr int kTimeoutScale = 10;  // an emulated tool runs several times slower
#else
constexpr const char* kLauncher = "";
constexpr int kTimeoutScale = 1;
#endif

std::vector<std::string> launcher_words() {
  std::vector<std::string> words;
  std::string word;
  for (const char* c = kLauncher;; ++c) {
    if (*c == ' ' || *c == '\0') {
      if (!word.empty()) words.push_back(word);
      word.clear();
      if (*c == '\0') break;
    } else {
      word += *c;
    }
  }
  return words;
}

// AddressSanitizer reserves terabytes of shadow address space: a sanitized tool (build-asan/) cannot start under the
// limit, so there it runs without one (the timeout still holds). Neither does an emulated tool (a cross build's,
// TERN_TOOL_LAUNCHER): the limit would be the emulator's, whose mappings do not follow the tool's one for one
// (under qemu a tool with 4 GB thread stacks still starts its second thread), so tests of its effect cannot hold.
#if defined(__SANITIZE_ADDRESS__) || defined(TERN_TOOL_LAUNCHER)
constexpr bool kLimitAddressSpace = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kLimitAddressSpace = false;
#else
constexpr bool kLimitAddressSpace = true;
#endif
#else
constexpr bool kLimitAddressSpace = true;
#endif

void set_limit(int resource, rlim_t value) {
  if (value == RLIM_INFINITY) return;
  rlimit r{value, value};
  setrlimit(resource, &r);
}

}  // namespace

namespace {

// fork + exec of `binary`, through the cross build's emulator when `emulated`.
pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const std::string& out_path,
            const std::string& err_path, const ToolLimits& limits, bool emulated) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  if (kLimitAddressSpace) set_limit(RLIMIT_AS, kAddressSpace);
  set_limit(RLIMIT_FSIZE, limits.file_size);
  set_limit(RLIMIT_STACK, limits.stack);
  const int fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) dup2(fd, 2);
  const int out = out_path.empty() ? open("/dev/null", O_WRONLY) : open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) dup2(out, 1);
  // Default dispositions, whatever the test runner set: the tools install their own.
  for (int sig : {SIGINT, SIGTERM, SIGXFSZ}) signal(sig, SIG_DFL);
  std::vector<std::string> words = emulated ? launcher_words() : std::vector<std::string>();
  words.push_back(binary);
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(const_cast<char*>(w.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

}  // namespace

pid_t spawn_tool(const std::string& binary, const std::vector<std::string>& args, const std::string& out_path,
                 const std::string& err_path, const ToolLimits& limits) {
  return spawn(binary, args, out_path, err_path, limits, /*emulated=*/true);
}

ToolRun wait_for_tool(pid_t pid, const std::string& out_path, const std::string& err_path, int timeout_s) {
  ToolRun r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s * kTimeoutScale);
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  if (!out_path.empty()) r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

std::string tool_command(const std::string& built) {
  const std::string launcher = kLauncher, path = std::string(TERN_BINARY_DIR) + "/" + built;
  return launcher.empty() ? path : launcher + " " + path;
}

ToolRun run_tool(const std::string& binary, const std::vector<std::string>& args, const std::string& scratch,
                 const ToolLimits& limits) {
  const std::string out = scratch + "/stdout.txt", err = scratch + "/stderr.txt";
  return wait_for_tool(spawn_tool(binary, args, out, err, limits), out, err);
}

ToolRun run_build_machine_program(const std::string& program, const std::vector<std::string>& args,
                                  const std::string& scratch) {
  const std::string out = scratch + "/stdout.txt", err = scratch + "/stderr.txt";
  return wait_for_tool(spawn(program, args, out, err, {}, /*emulated=*/false), out, err);
}

bool tool_address_space_limited() { return kLimitAddressSpace; }

bool has_exited(pid_t pid) {
  siginfo_t info{};
  if (waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return true;
  return info.si_pid != 0;
}

}  // namespace tern::test
