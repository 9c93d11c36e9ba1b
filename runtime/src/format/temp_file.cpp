// SPDX-License-Identifier: MIT
#include "format/temp_file.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "format/regular_file.h"

namespace tern {
namespace {

constexpr const char kSuffix[] = ".tmp-XXXXXX";
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// The temporaries a signal handler must remove. A slot is claimed and filled by ordinary code, then armed; the
// handler reads armed slots only, with async-signal-safe calls (unlink, raise).
struct Slot {
  std::atomic<bool> claimed{false};
  volatile sig_atomic_t armed = 0;
  char path[PATH_MAX];
};
constexpr int kSlots = 16;
Slot g_slots[kSlots];

// The thread that installed the handlers (a program's main thread), which alone creates temporaries and cleans up.
pid_t g_cleanup_tid = 0;

pid_t this_thread_id() { return pid_t(::syscall(SYS_gettid)); }

extern "C" void remove_temporaries_and_die(int sig) {
  // A signal taken by another thread (a worker pool's) goes to the cleaning thread instead. Only that thread
  // creates temporaries, with the signals blocked until the new one is armed (SignalBlock): a signal handled
  // anywhere else could run while a temporary exists but is not armed yet, and the process would die leaving it.
  if (g_cleanup_tid != 0 && this_thread_id() != g_cleanup_tid) {
    const int saved_errno = errno;
    ::syscall(SYS_tgkill, ::getpid(), g_cleanup_tid, sig);
    errno = saved_errno;
    return;
  }
  for (Slot& s : g_slots)
    if (s.armed) ::unlink(s.path);
  // Only now the default action: a second signal (`timeout` sends SIGINT to the child, then to its whole group)
  // that reaches another thread while this one unlinks runs this handler there too, instead of killing the
  // process before the temporaries are gone, as a reset on entry (SA_RESETHAND) would let it. The signal, blocked
  // while this handler runs, is delivered again on return and ends the process as it would have without the
  // handler (exit status, core dump).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

// The line report_truncated_mappings' handler writes, built before any signal: the handler only write()s it.
char g_bus_message[256];
size_t g_bus_message_size = 0;

extern "C" void report_truncated_mapping_and_exit(int sig, siginfo_t* info, void*) {
  if (info == nullptr || info->si_code != BUS_ADRERR) {
    ::signal(sig, SIG_DFL);  // not a mapping past its file's end: a fault to die of, as without the handler
    ::raise(sig);
    return;
  }
  for (Slot& s : g_slots)
    if (s.armed) ::unlink(s.path);
  const ssize_t ignored = ::write(STDERR_FILENO, g_bus_message, g_bus_message_size);
  (void)ignored;
  ::_exit(1);
}

// Blocks the cleanup signals for the scope, so that a temporary cannot be created and then missed by the handler.
class SignalBlock {
 public:
  SignalBlock() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : kCleanupSignals) sigaddset(&set, sig);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalBlock() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

int arm(const std::string& path) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].claimed.compare_exchange_strong(expected, true)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    g_slots[i].armed = 1;
    return i;
  }
  return -1;  // more temporaries at once than slots: still removed on every error path, not on a signal
}

void disarm(int slot) {
  if (slot < 0) return;
  g_slots[slot].armed = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_slots[slot].claimed.store(false);
}

// The longest prefix of s[0, n) that ends on a UTF-8 character boundary.
size_t utf8_prefix(const std::string& s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

void remove_temporaries_on_signals() {
  g_cleanup_tid = this_thread_id();
  struct sigaction sa {};
  sa.sa_handler = remove_temporaries_and_die;
  sigemptyset(&sa.sa_mask);
  for (int sig : kCleanupSignals) sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = 0;  // not SA_RESETHAND: the handler restores the default action after it has cleaned up
  for (int sig : kCleanupSignals) {
    struct sigaction old {};
    // A signal the caller's parent set to be ignored (nohup, a shell's background job) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

void report_truncated_mappings(const char* program) {
  const int n = std::snprintf(g_bus_message, sizeof g_bus_message,
                              "%s: error: the model file was truncated or changed while mapped (a page it held is "
                              "gone); a model file must not change while it is in use\n",
                              program);
  g_bus_message_size = n < 0 ? 0 : std::min(size_t(n), sizeof g_bus_message - 1);
  struct sigaction sa {};
  sa.sa_sigaction = report_truncated_mapping_and_exit;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_SIGINFO;
  ::sigaction(SIGBUS, &sa, nullptr);
}

std::string temp_template(const std::string& dest) {
  const size_t slash = dest.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : dest.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? dest : dest.substr(slash + 1);
  const size_t room = NAME_MAX - (sizeof kSuffix - 1);
  if (name.size() > room) name.resize(utf8_prefix(name, room));
  return dir + name + kSuffix;
}

Status check_replaceable(const std::string& dest) {
  struct stat st {};
  if (::stat(dest.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return IoError("cannot write '" + dest + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode))
    return IoError("'" + dest + "' is " + file_kind(st.st_mode) + ", not a regular file; refusing to replace it");
  return Status::Ok();
}

TempFile::~TempFile() { remove(); }

void TempFile::remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
  disarm(slot_);
  slot_ = -1;
}

Status TempFile::create(const std::string& dest) {
  dest_ = dest;
  std::string templ = temp_template(dest);
  {
    SignalBlock block;
    fd_ = ::mkstemp(templ.data());
    if (fd_ < 0) return IoError("'" + dest + "': cannot create a temporary file next to it: " + std::strerror(errno));
    path_ = templ;
    slot_ = arm(path_);
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd_, 0666 & ~mask);  // mkstemp makes 0600; a model file is as readable as any other output
  return Status::Ok();
}

Status TempFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = w < 0 ? std::strerror(errno) : "nothing written";
      return IoError("'" + dest_ + "': write failed after " + std::to_string(written_) + " bytes: " + why);
    }
    p += w;
    n -= size_t(w);
    written_ += uint64_t(w);
  }
  return Status::Ok();
}

Status TempFile::pad_to(uint64_t offset) {
  static const uint8_t zeros[64] = {};
  while (written_ < offset)
    TERN_RETURN_IF_ERROR(write(zeros, size_t(std::min<uint64_t>(offset - written_, sizeof zeros))));
  return Status::Ok();
}

Status TempFile::commit() {
  if (::fsync(fd_) != 0) return IoError("'" + dest_ + "': fsync failed: " + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return IoError("'" + dest_ + "': close failed: " + std::strerror(errno));
  if (::rename(path_.c_str(), dest_.c_str()) != 0)
    return IoError("'" + dest_ + "': cannot rename the finished file into place: " + std::strerror(errno));
  path_.clear();
  disarm(slot_);
  slot_ = -1;
  // Makes the rename durable; best effort, a failure here does not undo a complete file.
  const size_t slash = dest_.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dest_.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace tern
