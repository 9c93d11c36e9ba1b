// SPDX-License-Identifier: MIT
// One loaded model shared by sessions on several threads at once: every thread's outputs must be bit for bit
// those of the same calls made on one thread, alone. A data race on the model, on shared kernel tables or
// between sessions shows up as a differing bit (and, under ThreadSanitizer, as a report).
#include <catch2/catch.hpp>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "convert.h"
#include "cpu/core_share.h"
#include "tern/tern.h"
#include "test_support.h"

namespace {

constexpr int kThreads = 4;
constexpr int kSessionsPerThread = 3;  // threads = 1, a 2-thread pool, and the default (the cores shared)
constexpr int kJobsPerThread = 6;
constexpr int kRounds = 2;             // each thread runs its jobs this many times over

// A golden with three attention kinds (sliding, dense, fixed), so that every kind's state is exercised.
tern_model* load_shared_model() {
  const std::string out = tern::test::scratch_dir("concurrency") + "/model.tern";
  tern::convert::ConvertOptions opts;
  opts.quiet = true;
  tern::Status st = tern::convert::convert_checkpoint(tern::test::source_path("tests/goldens/mixed_layers"), out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

// One sequence and how it is fed: forward on the first segment, append for the rest; some appends ask for
// no logits (they only advance the state).
struct Job {
  std::vector<int32_t> ids;
  std::vector<int64_t> segments;
  std::vector<bool> want_logits;
};

Job make_job(uint32_t seed, int64_t vocab, int64_t max_tokens) {
  std::mt19937 rng(seed);
  Job job;
  const int64_t n = 1 + int64_t(rng() % uint32_t(max_tokens));
  for (int64_t i = 0; i < n; ++i) job.ids.push_back(int32_t(rng() % uint32_t(vocab)));
  for (int64_t done = 0; done < n;) {
    const int64_t seg = std::min<int64_t>(n - done, 1 + int64_t(rng() % 40));
    job.segments.push_back(seg);
    job.want_logits.push_back(done == 0 || rng() % 4 != 0);  // forward always returns logits
    done += seg;
  }
  return job;
}

// Runs the job on `s`; returns every logit it asked for, concatenated. Empty on any failure.
std::vector<float> run_job(tern_session* s, const Job& job, int64_t vocab) {
  std::vector<float> all, logits;
  int64_t done = 0;
  for (size_t i = 0; i < job.segments.size(); ++i) {
    const int64_t seg = job.segments[i];
    logits.assign(size_t(seg * vocab), 0.0f);
    float* out = job.want_logits[i] ? logits.data() : nullptr;
    const tern_status st = i == 0 ? tern_session_forward(s, job.ids.data(), seg, out)
                                  : tern_session_append(s, job.ids.data() + done, seg, out);
    if (st != TERN_OK) return {};
    if (out) all.insert(all.end(), logits.begin(), logits.end());
    done += seg;
  }
  return all;
}

tern_session* make_session(const tern_model* model, int threads) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  tern_session* s = nullptr;
  return tern_session_create(model, &so, &s) == TERN_OK ? s : nullptr;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("concurrency: 4 threads x 3 sessions on one model match single-threaded runs bit for bit", "[concurrency]") {
  tern_model* model = load_shared_model();
  tern_model_info info;
  REQUIRE(tern_model_get_info(model, &info) == TERN_OK);
  const int64_t vocab = info.vocab_size;
  const int pool_threads[kSessionsPerThread] = {1, 2, 0};

  // Expected outputs: each job run alone on the main thread, on a session of each pool size.
  std::vector<Job> jobs;
  for (int t = 0; t < kThreads; ++t) {
    for (int j = 0; j < kJobsPerThread; ++j) jobs.push_back(make_job(uint32_t(1000 * t + j), vocab, std::min<int64_t>(info.max_context, 160)));
  }
  std::vector<std::vector<float>> expected[kSessionsPerThread];
  for (int k = 0; k < kSessionsPerThread; ++k) {
    tern_session* s = make_session(model, pool_threads[k]);
    REQUIRE(s != nullptr);
    for (const Job& job : jobs) {
      expected[k].push_back(run_job(s, job, vocab));
      REQUIRE(!expected[k].back().empty());
    }
    tern_session_free(s);
  }

  // Each thread creates its own sessions and runs its jobs on both, interleaved, several rounds over.
  std::vector<int> mismatches(kThreads, 0), failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      tern_session* sessions[kSessionsPerThread];
      for (int k = 0; k < kSessionsPerThread; ++k) sessions[k] = make_session(model, pool_threads[k]);
      for (int k = 0; k < kSessionsPerThread; ++k) {
        if (!sessions[k]) ++failures[size_t(t)];
      }
      for (int round = 0; round < kRounds && failures[size_t(t)] == 0; ++round) {
        for (int j = 0; j < kJobsPerThread; ++j) {
          const size_t job = size_t(t * kJobsPerThread + j);
          for (int k = 0; k < kSessionsPerThread; ++k) {
            if (!same_bits(run_job(sessions[k], jobs[job], vocab), expected[k][job])) ++mismatches[size_t(t)];
          }
        }
      }
      for (int k = 0; k < kSessionsPerThread; ++k) tern_session_free(sessions[k]);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(failures[size_t(t)] == 0);
    CHECK(mismatches[size_t(t)] == 0);
  }
  tern_model_free(model);
}

TEST_CASE("concurrency: two threads calling one session at once are told so, and the session stays sound", "[concurrency]") {
  // An app bug (tern.h: one thread at a time per session): each call either runs whole or returns
  // TERN_INVALID_ARGUMENT at once, with the message in the calling thread's slot; nothing races in the kernels.
  tern_model* model = load_shared_model();
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = 1;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  const int64_t vocab = tern_session_vocab_size(s);
  const std::vector<int32_t> ids = tern::test::random_ids(64, vocab, 5);
  std::vector<float> alone(size_t(64 * vocab));
  REQUIRE(tern_session_forward(s, ids.data(), 64, alone.data()) == TERN_OK);

  std::atomic<int> refused{0}, ran{0}, other{0};
  std::atomic<bool> stop{false};
  std::string messages[2];  // each thread's first refusal
  auto caller = [&](int thread) {
    std::vector<float> logits(size_t(64 * vocab));
    for (int i = 0; i < 400 && !stop; ++i) {
      const tern_status st = tern_session_forward(s, ids.data(), 64, logits.data());
      if (st == TERN_OK) {
        ++ran;
        if (std::memcmp(logits.data(), alone.data(), alone.size() * sizeof(float)) != 0) ++other;
      } else if (st == TERN_INVALID_ARGUMENT) {
        if (messages[thread].empty()) messages[thread] = tern_last_error();
        if (++refused > 20) stop = true;
      } else {
        ++other;
      }
    }
  };
  std::thread a(caller, 0), b(caller, 1);
  a.join();
  b.join();
  INFO(ran << " calls ran, " << refused << " refused");
  CHECK(other == 0);  // every call that ran gave the logits of the call made alone
  CHECK(ran > 0);
  CHECK(refused > 0);  // 400 calls each way overlap
  for (const std::string& m : messages) {
    if (m.empty()) continue;  // that thread was never refused
    CHECK(m == "tern_session_forward: the session is in a call on another thread; a session takes one call at a time");
  }
  // The session is free again and sound.
  std::vector<float> after(alone.size());
  REQUIRE(tern_session_forward(s, ids.data(), 64, after.data()) == TERN_OK);
  CHECK(std::memcmp(after.data(), alone.data(), alone.size() * sizeof(float)) == 0);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("concurrency: a default session's call takes its workers only on cores no other call or process holds",
          "[concurrency]") {
  tern::cpu::CoreShare share(2);
  // Alone on an idle machine (1 runnable thread: the caller): the call runs on its pool.
  CHECK(share.enter(1, false, 1));
  CHECK(share.busy() == 2);
  // A second call meanwhile finds both cores held: inline, though it counts its own thread.
  CHECK_FALSE(share.enter(1, false, 1));
  CHECK(share.busy() == 3);
  // A session given threads = 2 takes its workers whatever the count.
  CHECK(share.enter(1, true, 40));
  share.leave(1, true);
  share.leave(1, false);
  share.leave(1, true);
  CHECK(share.busy() == 0);
  // Another process's thread running on the second core: inline. Unknown load (-1): only the calls count.
  CHECK_FALSE(share.enter(1, false, 2));
  share.leave(1, false);
  CHECK(share.enter(1, false, -1));
  share.leave(1, true);
  // Four cores, one held by a call: a call of 3 workers does not fit, one of 2 does.
  tern::cpu::CoreShare four(4);
  CHECK_FALSE(four.enter(0, false, 1));  // a call of one thread only counts itself
  CHECK_FALSE(four.enter(3, false, 2));
  four.leave(3, false);
  CHECK(four.enter(2, false, 2));
  CHECK(four.busy() == 4);
}

TEST_CASE("concurrency: a default session's call run inline gives the bits of the same call on its pool",
          "[concurrency]") {
  const int cores = int(std::thread::hardware_concurrency());
  if (cores < 2) {
    WARN("one hardware thread: a default session has no pool to compare with");
    return;
  }
  tern_model* model = load_shared_model();
  tern_model_info info;
  REQUIRE(tern_model_get_info(model, &info) == TERN_OK);
  const int64_t vocab = info.vocab_size;
  // The pool: threads = the hardware threads given explicitly, which the default takes (and always runs on them).
  tern_session* pooled = make_session(model, cores);
  tern_session* shared = make_session(model, 0);
  REQUIRE(pooled != nullptr);
  REQUIRE(shared != nullptr);
  const Job job = make_job(7, vocab, 120);
  const std::vector<float> on_pool = run_job(pooled, job, vocab);
  // Every core held, as by other calls: the default session runs each call on its calling thread alone.
  tern::cpu::CoreShare& process = tern::cpu::CoreShare::process();
  process.enter(cores, true, -1);
  const std::vector<float> inline_run = run_job(shared, job, vocab);
  process.leave(cores, true);
  CHECK(same_bits(inline_run, on_pool));
  tern_session_free(shared);
  tern_session_free(pooled);
  tern_model_free(model);
}

namespace {

// CPU seconds this process's threads other than the calling one have used so far.
double other_threads_cpu_seconds() {
  timespec process{}, self{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &process);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &self);
  return double(process.tv_sec - self.tv_sec) + double(process.tv_nsec - self.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("concurrency: a pool's workers sleep between calls instead of spinning", "[concurrency]") {
  if (std::thread::hardware_concurrency() < 2) {
    WARN("one hardware thread: no second core for a worker");
    return;
  }
  // pthreadpool's workers spin for a million pause instructions after each parallel region unless told to yield;
  // the last region of a default session's call tells them (a session given threads = N keeps pthreadpool's own
  // spin-then-sleep). A worker still spinning uses CPU time while the caller sleeps. The default session runs a call
  // on its pool only while the machine's cores are free: a call its workers took no part in proves nothing, so the
  // check counts the calls they did run (other_threads_cpu_seconds grew during the call).
  tern_model* model = load_shared_model();
  tern_session* s = make_session(model, 0);
  REQUIRE(s != nullptr);
  const int64_t vocab = tern_session_vocab_size(s);
  const Job job = make_job(11, vocab, 64);
  int pooled_calls = 0;
  for (int call = 0; call < 20 && pooled_calls < 3; ++call) {
    const double start = other_threads_cpu_seconds();
    REQUIRE(!run_job(s, job, vocab).empty());
    const double before = other_threads_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double idle_cpu = other_threads_cpu_seconds() - before;
    if (before - start <= 0) continue;  // ran on the calling thread alone
    ++pooled_calls;
    INFO("call " << call << ": the workers used " << idle_cpu * 1e3 << " ms of CPU in 200 ms after it");
    CHECK(idle_cpu < 0.002);
  }
  if (pooled_calls == 0) WARN("the machine's cores were never free: every call ran on the calling thread");
  tern_session_free(s);
  tern_model_free(model);
}
