// SPDX-License-Identifier: MIT
// The op case table: every op and attention-kind case listed once, run on every backend by tests/test_backend_ops.cpp
// (the pattern of ggml's tests/test-backend-ops.cpp). A case is a name, a builder (a small model around the op: ids ->
// EMBEDDING of a random table -> op, through the real writer, loader, planner and session), the reference output of
// each run (from the ref:: kernels, ops/reference.h), a tolerance per backend and, for the streaming kinds, the
// segments to append and the state bytes to expect. The runner checks each backend against the reference, Vulkan
// also against the CPU path on the same run, with no validation message; a failure names the case and the backend.
//
// Each group (an op or kind family) is one Catch2 test per backend, "<group> on CPU" and "<group> on Vulkan", and
// each case a section of it: ctest lists and parallelises the groups, and one process per group keeps the Vulkan
// start-up (instance, device, lavapipe's compiler) off every case. One case alone:
//   build/tests/test_backend_ops "attention sliding on Vulkan" -c "attention sliding w=5 heads 2x8 n=70"
// and `build/tests/test_backend_ops --list-tests` shows the groups with their tags.
//
// Adding a case:
//   1. Pick the family file (op_cases_basic.cpp: plain ops and positions; op_cases_attention.cpp: pattern kinds and
//      adaptive span; op_cases_sequence.cpp: LSH and routing; op_cases_memory.cpp: Transformer-XL, compressive and
//      adaptive input / softmax), or start one and list its add_*_cases in op_cases.cpp.
//   2. Append an OpCase: a unique name that says the sizes (a Catch2 section name: no ',' '[' ']' '*' or '"'), its
//      group (an existing one, or a new family: a new test per backend), tags, and a build() that makes the model
//      with OpGraph (op_graph.h) and returns it with its runs. Draw random inputs (never zeros); compute `want` with
//      the reference kernels, not with the runtime.
//   3. Sessions: each CaseSession is one tern_session (max_tokens, max_batch) per backend; its runs go through it
//      one after another, each after a reset. A streaming kind lists its segments (appends of that many tokens,
//      compared with the reference of that same cut) and its state bytes where they are known in closed form.
//   4. Sizes: the CPU runs anything; CI runs Vulkan on lavapipe, a CPU implementation of Vulkan, slowly. Larger
//      sizes that only the CPU should run go into a CaseSession with `on = On::kCpuOnly`, or into a case of their
//      own with `on = On::kCpuOnly`; each kind keeps at least one case that every backend runs.
//   5. A backend that lacks the op (a new kind before its shader): list it in may_refuse. There TERN_UNSUPPORTED at
//      session creation is a visible skip with the library's message (ctest reports the group as skipped);
//      anywhere else a refusal fails the test with that message.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tern/tern.h"

namespace tern::test {

// Which backends run a session's runs.
enum class On { kEveryBackend, kCpuOnly, kDeviceOnly };

// One call sequence through a session, after a reset.
struct CaseRun {
  std::vector<int32_t> ids;  // [n] token ids: rows of the case's random embedding table
  int64_t segment = 0;       // 0: one forward call; > 0: appends of `segment` tokens (the last may be shorter)
  std::vector<float> want;   // [n, width] from the reference kernels, for this cut (streaming kinds carry state)
};

// One session per backend (and per CPU thread count) and the runs through it.
struct CaseSession {
  int64_t max_tokens = 0;  // session options; 0 keeps the library's default
  int64_t max_batch = 0;
  std::vector<CaseRun> runs;
  On on = On::kEveryBackend;
  // The state the session allocates, and the planner's state at each of state_plan_tokens, is exactly these bytes.
  std::optional<uint64_t> state_bytes;
  std::vector<int64_t> state_plan_tokens;
  // tern_session_options.forward_only: every run one forward call (a kind a backend runs on whole sequences only,
  // such as routing on Vulkan, is refused at creation in a session that may continue one).
  bool forward_only = false;
  // Environment variables set while the session (not its CPU twin) is created: the Vulkan device overrides
  // (TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE, TERN_VULKAN_NO_SUBGROUP_ARITHMETIC) that give a session another path.
  std::vector<std::pair<std::string, std::string>> device_env;
};

// What build() returns: the loaded model (the runner frees it) and its sessions.
struct BuiltCase {
  tern_model* model = nullptr;
  int64_t width = 0;  // output columns
  std::vector<CaseSession> sessions;
};

struct OpCase {
  std::string name;   // unique: the Catch2 section within its group's test
  std::string group;  // the family, e.g. "layer_norm": one test "<group> on CPU" / "<group> on Vulkan" runs its cases
  std::string tags;   // Catch2 tags, e.g. "[ops]"; the runner adds [backend_ops] and, on Vulkan, [vulkan]
  std::function<BuiltCase()> build;  // runs inside the test: may use Catch2 assertions
  // ||out - ref|| / ||ref|| bounds (DESIGN.md, Numerics): fp32 CPU 1e-5 per op, Vulkan fp32 1e-4. Off the CPU the
  // same bound holds against the CPU path's output.
  double cpu_tolerance = 1e-5;
  double vulkan_tolerance = 1e-4;
  // Off the CPU, the bound against the CPU path's output; < 0: vulkan_tolerance. Wider where the CPU path is the
  // less exact one (int8 activations for int8 / int4 weights).
  double vulkan_vs_cpu_tolerance = -1;
  std::vector<int> cpu_threads = {1, 2};  // the CPU runs each session at each count; Vulkan sessions use 1
  int passes = 1;  // each run repeated, a reset before each: the state starts over
  // Off the CPU: the session's allocated state bytes equal a CPU session's of the same options.
  bool state_matches_cpu = false;
  // Each output row is log-probabilities: sum(exp(row)) within the backend's tolerance of 1.
  bool rows_are_log_probabilities = false;
  // >= 0: a forward of this one id is refused with TERN_INVALID_ARGUMENT, "outside the vocabulary".
  int32_t out_of_range_id = -1;
  std::vector<tern_backend> may_refuse;
  // The backends the case is registered on: kCpuOnly for the larger sizes of a kind that only the CPU runs in
  // reasonable time, next to the kind's device-size cases that every backend runs.
  On on = On::kEveryBackend;
};

// Every case, in a fixed order; names are unique.
const std::vector<OpCase>& op_cases();

// The family lists op_cases() joins.
void add_basic_cases(std::vector<OpCase>& out);
void add_attention_cases(std::vector<OpCase>& out);
void add_sequence_cases(std::vector<OpCase>& out);
void add_memory_cases(std::vector<OpCase>& out);
void add_decoder_cases(std::vector<OpCase>& out);
void add_linear_cases(std::vector<OpCase>& out);

}  // namespace tern::test
