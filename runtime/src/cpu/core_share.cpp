// SPDX-License-Identifier: MIT
#include "cpu/core_share.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace tern::cpu {
namespace {

// The running count of /proc/loadavg ("0.52 0.61 0.70 3/412 12345": 3 runnable now), or -1.
int read_runnable_threads() {
  const int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t got = read(fd, text, sizeof text - 1);
  close(fd);
  if (got <= 0) return -1;
  text[got] = '\0';
  const char* p = text;
  for (int field = 0; field < 3 && p; ++field) {  // past the three load averages
    p = std::strchr(p, ' ');
    if (p) ++p;
  }
  if (!p) return -1;
  char* end = nullptr;
  const long running = std::strtol(p, &end, 10);
  return end != p && *end == '/' && running >= 0 ? int(std::min(running, 1L << 20)) : -1;
}

}  // namespace

CoreShare& CoreShare::process() {
  static CoreShare share(int(std::max(1u, std::thread::hardware_concurrency())));
  return share;
}

bool CoreShare::enter(int workers, bool always, int runnable) {
  int busy = busy_.fetch_add(1, std::memory_order_relaxed) + 1;  // the calling thread
  if (workers <= 0) return false;
  if (always) {
    busy_.fetch_add(workers, std::memory_order_relaxed);
    return true;
  }
  // Threads of other processes: those the machine runs beyond this process's calls (which it counts too).
  for (;;) {
    const int others = std::max(0, runnable - busy);
    if (busy + others + workers > cores_) return false;
    if (busy_.compare_exchange_weak(busy, busy + workers, std::memory_order_relaxed)) return true;
  }
}

void CoreShare::leave(int workers, bool taken) {
  busy_.fetch_sub(1 + (taken ? workers : 0), std::memory_order_relaxed);
}

int machine_runnable_threads() {
  static std::atomic<int64_t> read_at{0};  // steady_clock nanoseconds of the last read; 0: never read
  static std::atomic<int> last{-1};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  constexpr int64_t kReadEvery = 10'000'000;  // ns
  int64_t then = read_at.load(std::memory_order_relaxed);
  // One thread rereads; others that arrive meanwhile take the last count.
  const bool fresh = then != 0 && now - then < kReadEvery;
  if (fresh || !read_at.compare_exchange_strong(then, now, std::memory_order_relaxed)) {
    return last.load(std::memory_order_relaxed);
  }
  const int runnable = read_runnable_threads();
  last.store(runnable, std::memory_order_relaxed);
  return runnable;
}

void park_workers(pthreadpool_t pool) {
  const size_t threads = pool ? pthreadpool_get_threads_count(pool) : 0;
  if (threads < 2) return;  // no workers: a pool of one runs everything on the caller
  // Every worker runs every region (some an empty range of it) and reads its flags; a range of one would run on
  // the caller alone, so one item per thread.
  auto nothing = [](void*, size_t) {};
  pthreadpool_parallelize_1d(pool, nothing, nullptr, threads, PTHREADPOOL_FLAG_YIELD_WORKERS);
}

CallCores::CallCores(CoreShare& share, pthreadpool_t pool, int threads, bool shared)
    : share_(share),
      pool_(pool),
      workers_(threads - 1),
      shared_(shared),
      taken_(share.enter(threads - 1, !shared, shared && threads > 1 ? machine_runnable_threads() : -1)) {}

CallCores::~CallCores() {
  if (taken_ && shared_) park_workers(pool_);
  share_.leave(workers_, taken_);
}

}  // namespace tern::cpu
