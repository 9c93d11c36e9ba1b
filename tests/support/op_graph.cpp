// SPDX-License-Identifier: MIT
#include "op_graph.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>

#include "test_support.h"
#include "writer.h"

namespace tern::test {

OpGraph start_graph(int64_t rows, int64_t d, uint32_t seed) {
  OpGraph g;
  g.d = d;
  g.table = random_floats(size_t(rows * d), seed);
  int32_t ids = g.graph.add_value("ids", fb::DType::I32, 1).value();
  REQUIRE(g.graph.add_input(ids).ok());
  int32_t table = add_constant(g, "table", {rows, d}, g.table);
  g.x = g.graph.add_value("x", fb::DType::F32, d).value();
  REQUIRE(g.graph.add_op(fb::OpCode::EMBEDDING, "embed", {ids}, {g.x}, {table}, fb::EmbeddingParamsT{}).ok());
  return g;
}

int32_t add_constant(OpGraph& g, const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
  auto shared = std::make_shared<std::vector<float>>(std::move(data));
  auto r = g.graph.add_tensor(name, fb::DType::F32, std::move(shape), [shared](uint8_t* dst, size_t size) {
    REQUIRE(size == shared->size() * sizeof(float));
    if (size > 0) std::memcpy(dst, shared->data(), size);  // an empty vector's data() may be null
    return Status::Ok();
  });
  REQUIRE(r.ok());
  return r.value();
}

tern_session* make_session(const tern_model* model, int threads, int64_t max_tokens, int64_t max_batch,
                           int64_t row_block_rows) {
  return make_session_on(TERN_BACKEND_CPU, model, threads, max_tokens, max_batch, row_block_rows);
}

tern_session_options options_on(tern_backend backend, int threads, int64_t max_tokens, int64_t max_batch) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;  // explicit: the default (AUTO) stores float16 on Vulkan
  so.backend = backend;
  so.threads = threads;
  so.max_tokens = max_tokens;
  so.max_batch = max_batch;
  return so;
}

namespace {

tern_session* created(const tern_model* model, const tern_session_options& so) {
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  return s;
}

}  // namespace

tern_session* make_session_on(tern_backend backend, const tern_model* model, int threads, int64_t max_tokens,
                              int64_t max_batch, int64_t row_block_rows) {
  tern_session_options so = options_on(backend, threads, max_tokens, max_batch);
  so.row_block_rows = row_block_rows;
  return created(model, so);
}

tern_session* make_forward_session_on(tern_backend backend, const tern_model* model, int threads, int64_t max_tokens,
                                      int64_t max_batch) {
  tern_session_options so = options_on(backend, threads, max_tokens, max_batch);
  so.forward_only = 1;
  return created(model, so);
}

tern_status refused_session_on(tern_backend backend, const tern_model* model, int64_t max_tokens) {
  const tern_session_options so = options_on(backend, 1, max_tokens, 0);
  tern_session* s = nullptr;
  const tern_status st = tern_session_create(model, &so, &s);
  CHECK(st != TERN_OK);
  CHECK(s == nullptr);
  tern_session_free(s);
  return st;
}

std::vector<float> run_ids(tern_session* s, const std::vector<int32_t>& ids, int64_t width, int64_t segment) {
  const auto n = int64_t(ids.size());
  std::vector<float> out(size_t(n * width));
  REQUIRE(tern_session_reset(s) == TERN_OK);
  if (segment == 0) {
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_forward(s, ids.data(), n, out.data()) == TERN_OK);
    return out;
  }
  for (int64_t pos = 0; pos < n; pos += segment) {
    const int64_t len = std::min(segment, n - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + pos * width) == TERN_OK);
  }
  return out;
}

std::vector<float> run_on(tern_backend backend, const tern_model* model, const std::vector<int32_t>& ids, int64_t width,
                          int64_t segment, int threads) {
  tern_session* s = make_session_on(backend, model, threads, int64_t(ids.size()), segment);
  std::vector<float> out = run_ids(s, ids, width, segment);
  tern_session_free(s);
  return out;
}

void check_forward(tern_session* s, tern_session* cpu, const std::vector<int32_t>& ids, int64_t width,
                   const std::vector<float>& want, double tolerance) {
  const auto n = int64_t(ids.size());
  std::vector<float> got(size_t(n * width));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, ids.data(), n, got.data()) == TERN_OK);
  const double vs_ref = relative_error(got.data(), want.data(), got.size());
  INFO("vs reference " << vs_ref);
  CHECK(vs_ref <= tolerance);
  if (cpu == nullptr) return;
  std::vector<float> base(got.size());
  REQUIRE(tern_session_forward(cpu, ids.data(), n, base.data()) == TERN_OK);
  const double vs_cpu = relative_error(got.data(), base.data(), got.size());
  INFO("vs CPU " << vs_cpu);
  CHECK(vs_cpu <= tolerance);
}

void check_streamed_twice(tern_backend backend, tern_session* s, const tern_model* model, const std::vector<int32_t>& ids,
                          int64_t width, int64_t segment, const std::vector<float>& want, double tolerance) {
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<float> got = run_ids(s, ids, width, segment);
    INFO("pass " << pass);
    CHECK(relative_error(got.data(), want.data(), got.size()) <= tolerance);
    if (backend != TERN_BACKEND_CPU) {
      const std::vector<float> on_cpu = run_on(TERN_BACKEND_CPU, model, ids, width, segment);
      CHECK(relative_error(got.data(), on_cpu.data(), got.size()) <= tolerance);
    }
  }
}

void check_state_bytes(tern_session* s, uint64_t expected, int64_t far_tokens) {
  tern_memory_plan allocated{}, far{};
  REQUIRE(tern_session_memory(s, &allocated) == TERN_OK);
  REQUIRE(tern_session_plan(s, far_tokens, &far) == TERN_OK);
  CHECK(allocated.state_bytes == expected);
  CHECK(far.state_bytes == expected);
}

void check_state_matches(tern_session* s, tern_session* cpu) {
  tern_memory_plan on_backend{}, on_cpu{};
  REQUIRE(tern_session_memory(s, &on_backend) == TERN_OK);
  REQUIRE(tern_session_memory(cpu, &on_cpu) == TERN_OK);
  CHECK(on_backend.state_bytes == on_cpu.state_bytes);
}

std::string write_graph(OpGraph& g, int32_t output, const std::string& name, int64_t max_context,
                        const std::function<void(convert::GraphBuilder&)>& before_write) {
  REQUIRE(g.graph.add_output(output).ok());
  g.graph.metadata().architecture = "op-test";
  g.graph.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
  g.graph.metadata().vocab_size = g.graph.values()[output].width;
  g.graph.metadata().max_context = max_context;
  if (before_write) before_write(g.graph);
  std::string path = scratch_dir("op_graph_" + name) + "/model.tern";
  convert::WriteOptions wo;
  wo.quiet = true;
  Status st = convert::write_model(g.graph, path, wo);
  INFO(st.message());
  REQUIRE(st.ok());
  return path;
}

tern_model* finish_and_load(OpGraph& g, int32_t output, const std::string& name, int64_t max_context) {
  const std::string path = write_graph(g, output, name, max_context);
  tern_model* model = nullptr;
  tern_status ls = tern_model_load(path.c_str(), &model);
  INFO(tern_last_error());
  REQUIRE(ls == TERN_OK);
  return model;
}

void expect_load_rejected(OpGraph& g, int32_t output, const std::string& name, const std::string& message) {
  REQUIRE(g.graph.add_output(output).ok());
  g.graph.metadata().architecture = "op-test";
  g.graph.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
  g.graph.metadata().vocab_size = g.graph.values()[output].width;
  const std::string path = scratch_dir("op_graph_" + name) + "/model.tern";
  REQUIRE(convert::write_model(g.graph, path, {true}).ok());
  tern_model* model = nullptr;
  CHECK(tern_model_load(path.c_str(), &model) == TERN_INVALID_MODEL);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains(message));
  CHECK(model == nullptr);
}

void check_plan_linear_in_n(tern_model* model, double min_growth, uint64_t state_bytes_per_token,
                            uint64_t state_bytes_fixed) {
  tern_session* s = make_session(model, 2, 65536);
  tern_memory_plan p4{}, p16{}, p64{};
  REQUIRE(tern_session_plan(s, 4096, &p4) == TERN_OK);
  REQUIRE(tern_session_plan(s, 16384, &p16) == TERN_OK);
  REQUIRE(tern_session_plan(s, 65536, &p64) == TERN_OK);
  INFO("arena " << p4.arena_bytes << ", " << p16.arena_bytes << ", " << p64.arena_bytes);
  for (auto [small, large] : {std::pair{p4, p16}, std::pair{p16, p64}}) {
    const double growth = double(large.arena_bytes) / double(small.arena_bytes);
    CHECK(growth > min_growth);
    CHECK(growth < 4.01);
    CHECK(large.dense_attention_bytes == 16 * small.dense_attention_bytes);
  }
  CHECK(p4.state_bytes == 4096 * state_bytes_per_token + state_bytes_fixed);
  CHECK(p16.state_bytes == 16384 * state_bytes_per_token + state_bytes_fixed);
  CHECK(p64.state_bytes == 65536 * state_bytes_per_token + state_bytes_fixed);
  CHECK(p64.arena_bytes * 100 < p64.dense_attention_bytes);
  tern_session_free(s);
}

}  // namespace tern::test
