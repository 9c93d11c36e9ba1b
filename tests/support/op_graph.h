// Builds small .tern models around one op under test: ids -> EMBEDDING(random table) -> op(s) -> output.
// The embedding turns token ids into chosen random rows, so the op sees random float input through the
// real loader, planner and session.
#pragma once

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
tern_session* make_session(const tern_model* model, int threads, int64_t max_tokens = 0, int64_t max_batch = 0);
// The same on a chosen backend (threads only matter on the CPU).
tern_session* make_session_on(tern_backend backend, const tern_model* model, int threads, int64_t max_tokens = 0,
                              int64_t max_batch = 0);
// Marks `output` as the model output, writes the model under the scratch dir and loads it.
tern_model* finish_and_load(OpGraph& g, int32_t output, const std::string& name, int64_t max_context);
// Marks `output` as the model output, writes the model and checks that loading it fails with TERN_INVALID_MODEL and
// a message containing `message`.
void expect_load_rejected(OpGraph& g, int32_t output, const std::string& name, const std::string& message);

}  // namespace tern::test
