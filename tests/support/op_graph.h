// SPDX-License-Identifier: MIT
// Builds small .tern models around one op under test: ids -> EMBEDDING(random table) -> op(s) -> output.
// The embedding turns token ids into chosen random rows, so the op sees random float input through the
// real loader, planner and session.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "tern/tern.h"

namespace tern::test {

struct OpGraph {
  convert::GraphBuilder graph;
  int32_t x = -1;        // the embedding's output value [n, d]
  std::vector<float> table;  // [rows, d], the random inputs
  int64_t d = 0;
};

// ids value + EMBEDDING with a random [rows, d] table; returns the graph with x set.
OpGraph start_graph(int64_t rows, int64_t d, uint32_t seed);
// A constant F32 tensor holding `data`.
int32_t add_constant(OpGraph& g, const std::string& name, std::vector<int64_t> shape, std::vector<float> data);
// A session on `model` (0 keeps an option's default); fails the test with the library's message otherwise.
// row_block_rows: the session option (0: each row-wise chain picks its own block).
tern_session* make_session(const tern_model* model, int threads, int64_t max_tokens = 0, int64_t max_batch = 0,
                           int64_t row_block_rows = 0);
// A forward_only session (every call a whole sequence) on `backend`: what a kind that a backend runs on whole
// sequences only (routing on Vulkan) needs; REQUIREs success.
tern_session* make_forward_session_on(tern_backend backend, const tern_model* model, int threads, int64_t max_tokens = 0,
                                      int64_t max_batch = 0);
// A session create on `backend` (one thread, max_tokens, the other options' defaults) that must fail: its status,
// with the message in tern_last_error().
tern_status refused_session_on(tern_backend backend, const tern_model* model, int64_t max_tokens);
// Session options on a backend with these sizes (threads only matter on the CPU), everything else the default.
tern_session_options options_on(tern_backend backend, int threads, int64_t max_tokens, int64_t max_batch);
// The same as make_session on a chosen backend (threads only matter on the CPU).
tern_session* make_session_on(tern_backend backend, const tern_model* model, int threads, int64_t max_tokens = 0,
                              int64_t max_batch = 0, int64_t row_block_rows = 0);
// After a reset, runs ids through s: one forward call (segment 0) or appends of `segment` tokens; the outputs [n, width].
std::vector<float> run_ids(tern_session* s, const std::vector<int32_t>& ids, int64_t width, int64_t segment = 0);
// The same on a fresh session of `backend` (max_tokens n, max_batch segment), freed after.
std::vector<float> run_on(tern_backend backend, const tern_model* model, const std::vector<int32_t>& ids, int64_t width,
                          int64_t segment = 0, int threads = 2);
// One forward of ids on s [n, width], within `tolerance` of want; where cpu is not null (a CPU session of the same
// model, for a test on another backend), also of the CPU path's output.
void check_forward(tern_session* s, tern_session* cpu, const std::vector<int32_t>& ids, int64_t width,
                   const std::vector<float>& want, double tolerance);
// Streams ids through s (a session on `backend`) in segments twice, a reset between (the state starts over); each
// pass within `tolerance` of want and, off the CPU, of the CPU path on `model` cut the same way.
void check_streamed_twice(tern_backend backend, tern_session* s, const tern_model* model, const std::vector<int32_t>& ids,
                          int64_t width, int64_t segment, const std::vector<float>& want, double tolerance);
// The state s has allocated, and the planner's state for `far_tokens` tokens, are both `expected` bytes.
void check_state_bytes(tern_session* s, uint64_t expected, int64_t far_tokens);
// The state s holds (its allocated bytes) is the state of cpu, a CPU session of the same model.
void check_state_matches(tern_session* s, tern_session* cpu);
// For a bucketed op (LSH, routing): the planner's arena for a CPU session of `model` grows by a factor in
// (min_growth, 4.01) from 4k to 16k and from 16k to 64k tokens, the state planned is state_bytes_per_token a token
// plus state_bytes_fixed (LSH's cache grows with n; routing's is bounded by its window), and at 64k the arena is
// under 1% of one n x n score matrix.
void check_plan_linear_in_n(tern_model* model, double min_growth, uint64_t state_bytes_per_token,
                            uint64_t state_bytes_fixed = 0);
// Marks `output` as the model output and writes the model under the scratch dir, `before_write` (when given)
// changing the graph last (compressing its weights, say); returns the file's path.
std::string write_graph(OpGraph& g, int32_t output, const std::string& name, int64_t max_context,
                        const std::function<void(convert::GraphBuilder&)>& before_write = nullptr);
// Marks `output` as the model output, writes the model under the scratch dir and loads it.
tern_model* finish_and_load(OpGraph& g, int32_t output, const std::string& name, int64_t max_context);
// Marks `output` as the model output, writes the model and checks that loading it fails with TERN_INVALID_MODEL and
// a message containing `message`.
void expect_load_rejected(OpGraph& g, int32_t output, const std::string& name, const std::string& message);

}  // namespace tern::test
