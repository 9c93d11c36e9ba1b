// SPDX-License-Identifier: MIT
#include "contention.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "cli.h"

namespace tern::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Holds every thread until all have arrived (their sessions created), then lets them go at once.
class StartLine {
 public:
  explicit StartLine(int count) : waiting_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--waiting_ == 0) {
      start_ = cli::Timer();
      open_.notify_all();
    }
    open_.wait(lock, [&] { return waiting_ == 0; });
  }
  double seconds_since_start() {
    std::lock_guard<std::mutex> lock(mutex_);
    return start_.seconds();
  }

 private:
  std::mutex mutex_;
  std::condition_variable open_;
  int waiting_;
  cli::Timer start_;
};

// One repetition: every session on its own thread; the seconds until the last one is done.
bool time_sessions(const tern_model* model, tern_session_options options, const std::vector<int32_t>& ids,
                   int64_t vocab, const SessionsWork& work, double* seconds, std::string* error) {
  options.max_tokens = std::max<int64_t>(1, work.prefill + work.generate);
  options.max_batch = std::max<int64_t>(1, work.prefill);
  StartLine start(work.sessions);
  std::vector<double> done(size_t(work.sessions), 0.0);
  std::vector<std::string> errors(size_t(work.sessions));
  std::vector<std::thread> threads;
  for (int i = 0; i < work.sessions; ++i) {
    threads.emplace_back([&, i] {
      tern_session* s = nullptr;
      const bool created = tern_session_create(model, &options, &s) == TERN_OK;
      if (!created) errors[size_t(i)] = tern_last_error();
      std::vector<float> logits(size_t(std::max<int64_t>(1, work.prefill) * vocab));
      start.arrive_and_wait();  // a failed session still arrives, so that the others are not held forever
      if (!created) return;
      bool ok = work.prefill == 0 || tern_session_forward(s, ids.data(), work.prefill, logits.data()) == TERN_OK;
      for (int64_t t = 0; ok && t < work.generate; ++t) {
        ok = tern_session_append(s, &ids[size_t(work.prefill + t)], 1, logits.data()) == TERN_OK;
      }
      done[size_t(i)] = start.seconds_since_start();
      if (!ok) errors[size_t(i)] = tern_session_last_error(s);
      tern_session_free(s);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) {
      *error = e;
      return false;
    }
  }
  *seconds = *std::max_element(done.begin(), done.end());
  return true;
}

}  // namespace

bool run_sessions(const tern_model* model, const tern_session_options& base, int64_t vocab, const SessionsWork& work,
                  SessionsTimes* times, std::string* error) {
  std::mt19937 rng(42);
  std::vector<int32_t> ids(size_t(work.prefill + work.generate));
  for (auto& id : ids) id = int32_t(rng() % uint64_t(vocab));
  tern_session_options one = base, shared = base;
  one.threads = 1;
  shared.threads = 0;
  double s = 0;
  // A warm-up of each first (the weights' pages, the allocator), then the timed runs alternated.
  for (int r = -1; r < work.repetitions; ++r) {
    if (!time_sessions(model, one, ids, vocab, work, &s, error)) return false;
    if (r >= 0) times->one_thread_s.push_back(s);
    if (!time_sessions(model, shared, ids, vocab, work, &s, error)) return false;
    if (r >= 0) times->default_s.push_back(s);
  }
  return true;
}

void print_sessions(const SessionsWork& work, const SessionsTimes& times, const std::string& model) {
  std::printf("model: %s\ncpu: %s, %lld hardware threads\n\n", model.c_str(), tern_cpu_description(),
              (long long)cli::hardware_threads());
  std::printf("%d sessions on %d threads at once, each: pp%lld then tg%lld; seconds until the last is done, "
              "median of %d runs (threads = 1 and default alternated)\n\n",
              work.sessions, work.sessions, (long long)work.prefill, (long long)work.generate, work.repetitions);
  std::printf("| sessions | threads = 1 s | default (0) s | default / threads = 1 | runs threads = 1 | runs default "
              "|\n");
  std::printf("|---:|---:|---:|---:|---|---|\n");
  auto list = [](const std::vector<double>& v) {
    std::string text;
    for (double x : v) {
      char item[32];
      std::snprintf(item, sizeof item, "%s%.2f", text.empty() ? "" : " ", x);
      text += item;
    }
    return text;
  };
  const double one = median(times.one_thread_s), shared = median(times.default_s);
  std::printf("| %d | %.2f | %.2f | %.2f | %s | %s |\n", work.sessions, one, shared, shared / one,
              list(times.one_thread_s).c_str(), list(times.default_s).c_str());
}

std::vector<pid_t> start_busy_processes(int count) {
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives tern-bench
      for (volatile uint64_t spin = 0;; spin = spin + 1) {
      }
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

void stop_busy_processes(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
}

}  // namespace tern::bench
