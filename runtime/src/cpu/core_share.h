// SPDX-License-Identifier: MIT
// The machine's cores, shared among the CPU sessions' calls, and a call's pool workers put to sleep when it ends.
//
// A pool runs well only on cores of its own: each parallel region ends when the last of its threads checks in, so a
// region waits for any thread the scheduler has set aside, and pthreadpool's threads spin while they wait. 4 sessions
// of 2 threads each on 2 cores took 76x the time of the same work with 1 thread each, and 2 threads on a busy machine
// generated 48 tokens/s where 1 thread generated 1,100. So every call counts the cores it uses: its own thread (the
// app's, which runs the call in any case) and, when it runs on its pool, the pool's workers. A session with the default
// thread count (tern_session_options.threads = 0) runs a call on its pool only when that many cores are free: held by
// no other session's call and not running another process's threads; otherwise it runs the call inline on the calling
// thread. A session given threads = N runs on its N threads always, and counts them, so that default sessions make way
// for it. A call's work is split the same way on the pool and inline (slots and key parts follow the session's thread
// count, not the threads that happen to run them): the results are bit for bit the same.
#pragma once

#include <pthreadpool.h>

#include <atomic>

namespace tern::cpu {

class CoreShare {
 public:
  explicit CoreShare(int cores) : cores_(cores) {}
  // The process's share of std::thread::hardware_concurrency() cores (the count the default thread count takes).
  static CoreShare& process();

  // A call starts: its thread takes a core, and `workers` more are taken when `always`, or when that many cores are
  // free: neither held by other calls nor, when `runnable` (the machine's runnable threads, the caller's included;
  // -1: unknown) says so, running other threads. Returns whether the workers were taken (the call runs on its pool).
  bool enter(int workers, bool always, int runnable);
  // The call has ended: gives back its core and, if enter took them, its workers'.
  void leave(int workers, bool taken);
  int busy() const { return busy_.load(std::memory_order_relaxed); }
  int cores() const { return cores_; }

 private:
  const int cores_;
  std::atomic<int> busy_{0};  // cores the running calls hold; above cores_ when calls run inline beside others
};

// The machine's runnable threads now, the caller included ("running" of /proc/loadavg's running/total field), read
// at most once every 10 ms (a call of one token takes well under that, and the file costs microseconds to read);
// -1 where it cannot be read.
int machine_runnable_threads();

// Puts a pool's workers to sleep: pthreadpool's workers spin-wait after every parallel region (a million pause
// instructions, milliseconds) in case another region follows, unless the region asked them to yield. A call of a
// session with the default thread count ends with one empty region that does, so its workers sleep between calls
// instead of holding cores that another session's call or another process could use. Regions within a call still
// find them spinning: yielding after each one made 2-thread generation up to 2x slower (each region then waits for
// its workers to wake). A session given threads = N keeps pthreadpool's own spin-then-sleep between calls: it was
// given its cores, and waking its workers at every call made 2-thread generation on a loaded machine 3x slower.
void park_workers(pthreadpool_t pool);

// One call's hold on the cores: CoreShare::enter at construction; park_workers (default thread count only) and leave
// at destruction.
class CallCores {
 public:
  // `threads`: the session's pool size; `shared`: the session took the default thread count.
  CallCores(CoreShare& share, pthreadpool_t pool, int threads, bool shared);
  ~CallCores();
  CallCores(const CallCores&) = delete;
  CallCores& operator=(const CallCores&) = delete;

  // The pool to run the call on: the session's, or null when the call runs inline on the calling thread.
  pthreadpool_t pool() const { return taken_ ? pool_ : nullptr; }

 private:
  CoreShare& share_;
  pthreadpool_t pool_;
  int workers_;
  bool shared_;
  bool taken_;
};

}  // namespace tern::cpu
