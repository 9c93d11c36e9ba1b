#include "op_graph.h"

#include <catch2/catch.hpp>
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
  REQUIRE(g.graph.add_op(fb::OpCode::EMBEDDING, "embed", {ids}, {g.x}, {table}, convert::params::Embedding{}).ok());
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

tern_session* make_session(const tern_model* model, int threads, int64_t max_tokens, int64_t max_batch) {
  return make_session_on(TERN_BACKEND_CPU, model, threads, max_tokens, max_batch);
}

tern_session* make_session_on(tern_backend backend, const tern_model* model, int threads, int64_t max_tokens,
                              int64_t max_batch) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = backend;
  so.threads = threads;
  so.max_tokens = max_tokens;
  so.max_batch = max_batch;
  tern_session* s = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  return s;
}

tern_model* finish_and_load(OpGraph& g, int32_t output, const std::string& name, int64_t max_context) {
  REQUIRE(g.graph.add_output(output).ok());
  g.graph.metadata().architecture = "op-test";
  g.graph.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
  g.graph.metadata().vocab_size = g.graph.values()[output].width;
  g.graph.metadata().max_context = max_context;
  std::string path = scratch_dir("op_graph_" + name) + "/model.tern";
  convert::WriteOptions wo;
  wo.quiet = true;
  Status st = convert::write_model(g.graph, path, wo);
  INFO(st.message());
  REQUIRE(st.ok());
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

}  // namespace tern::test
