// SPDX-License-Identifier: MIT
#include "cpu/thread_probe.h"

#include <pthread.h>

#include <cstring>
#include <string>
#include <vector>

namespace tern::cpu {
namespace {

// The probe threads wait here until every one has started (so that they are alive together, as a pool's are).
struct Gate {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t open_cond = PTHREAD_COND_INITIALIZER;
  bool open = false;
};

extern "C" void* wait_at_gate(void* arg) {
  auto* gate = static_cast<Gate*>(arg);
  pthread_mutex_lock(&gate->mutex);
  while (!gate->open) pthread_cond_wait(&gate->open_cond, &gate->mutex);
  pthread_mutex_unlock(&gate->mutex);
  return nullptr;
}

}  // namespace

Status probe_worker_threads(int workers) {
  Gate gate;
  std::vector<pthread_t> started;
  started.reserve(size_t(workers));
  int error = 0;
  for (int i = 0; i < workers && error == 0; ++i) {
    pthread_t t;
    error = pthread_create(&t, nullptr, wait_at_gate, &gate);
    if (error == 0) started.push_back(t);
  }
  pthread_mutex_lock(&gate.mutex);
  gate.open = true;
  pthread_cond_broadcast(&gate.open_cond);
  pthread_mutex_unlock(&gate.mutex);
  for (pthread_t t : started) pthread_join(t, nullptr);
  if (error == 0) return Status::Ok();
  return OutOfMemory("cannot start a thread pool of " + std::to_string(workers + 1) + " threads: thread " +
                     std::to_string(started.size() + 2) + " failed to start (" + std::strerror(error) +
                     "; a limit such as ulimit -u, -s or -v?); give fewer threads");
}

}  // namespace tern::cpu
