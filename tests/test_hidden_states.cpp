// SPDX-License-Identifier: MIT
// The last hidden state (tern_session_forward_hidden): against transformers' last_hidden_state of the base model,
// from tests/goldens/hidden_states/<case> (tools/reference/make_hidden_goldens.py, on the hf_<case> checkpoints),
// its mean over positions, the session's state after the call, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "cli.h"
#include "convert.h"
#include "hf_goldens.h"
#include "npy.h"
#include "op_graph.h"
#include "test_support.h"

using namespace tern;

namespace {

constexpr double kModelTolerance = 1e-4;  // fp32 CPU end to end (DESIGN.md, "Numerics")

struct HiddenGolden {
  std::string checkpoint;  // tests/goldens/hf_<case>
  std::vector<int32_t> ids;
  npy::Array hidden;  // [n, d]
  npy::Array pooled;  // [d]
};

HiddenGolden load_hidden_golden(const std::string& name) {
  HiddenGolden g;
  const std::string dir = test::source_path("tests/goldens/hidden_states/" + name);
  g.checkpoint = test::source_path("tests/goldens/hf_" + name);
  std::string error;
  INFO(name << ": " << error);
  REQUIRE(cli::read_ids_json(dir + "/ids.json", &g.ids, &error));
  REQUIRE(npy::read_f32(dir + "/hidden.npy", &g.hidden, &error));
  REQUIRE(npy::read_f32(dir + "/pooled.npy", &g.pooled, &error));
  REQUIRE(g.hidden.shape.size() == 2);
  REQUIRE(g.hidden.shape[0] == int64_t(g.ids.size()));
  REQUIRE(g.pooled.shape == std::vector<int64_t>{g.hidden.shape[1]});
  return g;
}

struct Progress {
  int64_t calls = 0;
};

void count_progress(int64_t, int64_t, void* user_data) { ++static_cast<Progress*>(user_data)->calls; }

}  // namespace

TEST_CASE("hidden states: last_hidden_state and its mean match transformers on the CPU", "[model][hf][hidden]") {
  for (const std::string name : {"llama_mha", "gemma2", "gpt2"}) {
    const HiddenGolden g = load_hidden_golden(name);
    tern_model* model = test::convert_and_load(g.checkpoint, "hidden_" + name, convert::ConvertOptions{true});
    const int64_t n = int64_t(g.ids.size()), d = g.hidden.shape[1];
    // Row blocks of 8 run the final norm a block at a time; 0 lets the session choose (one block at these sizes).
    for (int64_t block_rows : {int64_t(0), int64_t(8)}) {
      tern_session* s = test::make_session(model, 2, n, n, block_rows);
      REQUIRE(tern_session_hidden_size(s) == d);
      std::vector<float> hidden(size_t(n * d)), pooled(static_cast<size_t>(d));
      INFO(name << ", row_block_rows " << block_rows << ": " << tern_session_last_error(s));
      REQUIRE(tern_session_forward_hidden(s, g.ids.data(), n, hidden.data(), pooled.data()) == TERN_OK);
      const double err = test::relative_error(hidden.data(), g.hidden.data.data(), hidden.size());
      const double pooled_err = test::relative_error(pooled.data(), g.pooled.data.data(), pooled.size());
      std::printf("hidden %-10s n %3lld row_block_rows %lld: hidden rel L2 %.3g, pooled %.3g\n", name.c_str(),
                  (long long)n, (long long)block_rows, err, pooled_err);
      CHECK(err <= kModelTolerance);
      CHECK(pooled_err <= kModelTolerance);
      // Only the mean, and only the rows: the same numbers.
      std::vector<float> pooled_only(size_t(d), -1.0f), rows_only(size_t(n * d), -1.0f);
      REQUIRE(tern_session_forward_hidden(s, g.ids.data(), n, nullptr, pooled_only.data()) == TERN_OK);
      CHECK(pooled_only == pooled);
      REQUIRE(tern_session_forward_hidden(s, g.ids.data(), n, rows_only.data(), nullptr) == TERN_OK);
      CHECK(rows_only == hidden);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
}

// An independent check of the rows: the hf_<case> goldens' logits are transformers' own (tools/reference/
// crosscheck_transformers.py), and on these models (vocab 300-320 > d 48, a random full-rank head) the logits fix the
// hidden state: Tern's rows times the checkpoint's head (through Gemma 2's final soft-cap) must give those logits.
TEST_CASE("hidden states: the rows times the head give transformers' logits", "[model][hf][hidden]") {
  for (const std::string name : {"llama_mha", "gemma2", "gpt2"}) {
    const std::string dir = test::source_path("tests/goldens/hf_" + name);
    std::vector<int32_t> ids;
    npy::Array golden;
    std::string error;
    INFO(name << ": " << error);
    REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
    REQUIRE(npy::read_f32(dir + "/logits.npy", &golden, &error));
    auto checkpoint = convert::Checkpoint::open(dir);
    REQUIRE(checkpoint.ok());
    const convert::Checkpoint& c = *checkpoint.value();
    const convert::TensorView* head = c.find("lm_head.weight");
    if (!head) head = c.find("model.embed_tokens.weight");  // tied
    if (!head) head = c.find("transformer.wte.weight");      // GPT-2, tied
    REQUIRE(head != nullptr);
    const int64_t n = int64_t(ids.size()), vocab = head->shape[0], d = head->shape[1];
    std::vector<float> w(size_t(vocab * d));
    REQUIRE(c.read_f32(*head, w.data()).ok());
    const double cap = c.config().value("final_logit_softcapping", 0.0);

    tern_model* model = test::convert_and_load(dir, "hidden_head_" + name, convert::ConvertOptions{true});
    tern_session* s = test::make_session(model, 1, n, n, 0);
    REQUIRE(tern_session_hidden_size(s) == d);
    std::vector<float> hidden(size_t(n * d));
    REQUIRE(tern_session_forward_hidden(s, ids.data(), n, hidden.data(), nullptr) == TERN_OK);
    std::vector<float> logits(size_t(n * vocab));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t v = 0; v < vocab; ++v) {
        double z = 0;
        for (int64_t k = 0; k < d; ++k) z += double(hidden[size_t(i * d + k)]) * w[size_t(v * d + k)];
        logits[size_t(i * vocab + v)] = float(cap > 0 ? cap * std::tanh(z / cap) : z);
      }
    }
    REQUIRE(golden.data.size() == logits.size());
    const double err = test::relative_error(logits.data(), golden.data.data(), logits.size());
    std::printf("hidden %-10s rows x head against transformers' logits: rel L2 %.3g\n", name.c_str(), err);
    CHECK(err <= kModelTolerance);
    tern_session_free(s);
    tern_model_free(model);
  }
}

TEST_CASE("hidden states: a call cut into parts by the callbacks gives the same rows", "[model][hf][hidden]") {
  const HiddenGolden g = load_hidden_golden("llama_mha");
  REQUIRE(int64_t(g.ids.size()) > TERN_CALLBACK_ROWS);  // two parts
  tern_model* model = test::convert_and_load(g.checkpoint, "hidden_parts", convert::ConvertOptions{true});
  const int64_t n = int64_t(g.ids.size()), d = g.hidden.shape[1];
  tern_session* s = test::make_session(model, 1, n, n);
  std::vector<float> whole(size_t(n * d)), parts(size_t(n * d)), pooled_whole(static_cast<size_t>(d)), pooled_parts(static_cast<size_t>(d));
  REQUIRE(tern_session_forward_hidden(s, g.ids.data(), n, whole.data(), pooled_whole.data()) == TERN_OK);
  Progress progress;
  REQUIRE(tern_session_set_callbacks(s, nullptr, count_progress, &progress) == TERN_OK);
  REQUIRE(tern_session_forward_hidden(s, g.ids.data(), n, parts.data(), pooled_parts.data()) == TERN_OK);
  CHECK(progress.calls == 2);
  CHECK(test::relative_error(parts.data(), whole.data(), whole.size()) <= 1e-6);
  CHECK(test::relative_error(pooled_parts.data(), pooled_whole.data(), pooled_whole.size()) <= 1e-6);
  CHECK(test::relative_error(parts.data(), g.hidden.data.data(), parts.size()) <= kModelTolerance);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("hidden states: the session holds the sequence after the call, as after a forward", "[model][hf][hidden]") {
  const HiddenGolden g = load_hidden_golden("gemma2");
  tern_model* model = test::convert_and_load(g.checkpoint, "hidden_continue", convert::ConvertOptions{true});
  const int64_t n = int64_t(g.ids.size()), d = g.hidden.shape[1];
  tern_session* s = test::make_session(model, 1, n + 4, n);
  const int64_t v = tern_session_vocab_size(s);
  const std::vector<int32_t> more = test::random_ids(4, v, 11);
  std::vector<float> pooled(static_cast<size_t>(d)), after_hidden(size_t(4 * v)), after_forward(size_t(4 * v));
  std::vector<float> logits(size_t(n * v));
  REQUIRE(tern_session_forward_hidden(s, g.ids.data(), n, nullptr, pooled.data()) == TERN_OK);
  CHECK(tern_session_position(s) == n);
  REQUIRE(tern_session_append(s, more.data(), 4, after_hidden.data()) == TERN_OK);
  REQUIRE(tern_session_forward(s, g.ids.data(), n, logits.data()) == TERN_OK);
  REQUIRE(tern_session_append(s, more.data(), 4, after_forward.data()) == TERN_OK);
  CHECK(after_hidden == after_forward);
  tern_session_free(s);
  tern_model_free(model);
}

TEST_CASE("hidden states: refused arguments and a model without a hidden state", "[hidden][errors]") {
  test::OpGraph g = test::start_graph(16, 8, 3);
  tern_model* embedding_only = test::finish_and_load(g, g.x, "hidden_none", 8);  // the output is the embedding's
  tern_session* s = test::make_session(embedding_only, 1);
  CHECK(tern_session_hidden_size(s) == 0);
  CHECK(std::string(tern_session_last_error(s)).find("EMBEDDING") != std::string::npos);
  const std::vector<int32_t> ids = {1, 2, 3};
  std::vector<float> out(64);
  CHECK(tern_session_forward_hidden(s, ids.data(), 3, out.data(), nullptr) == TERN_UNSUPPORTED);
  CHECK(std::string(tern_session_last_error(s)).find("no last hidden state") != std::string::npos);
  CHECK(tern_session_forward_hidden(s, ids.data(), 3, nullptr, nullptr) == TERN_INVALID_ARGUMENT);
  CHECK(std::string(tern_session_last_error(s)).find("both NULL") != std::string::npos);
  CHECK(tern_session_forward_hidden(s, nullptr, 3, out.data(), nullptr) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_forward_hidden(s, ids.data(), 0, out.data(), nullptr) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_forward_hidden(nullptr, ids.data(), 3, out.data(), nullptr) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_hidden_size(nullptr) == 0);
  tern_session_free(s);
  tern_model_free(embedding_only);
}

TEST_CASE("hidden states: a Vulkan session refuses, naming the backend", "[hidden][vulkan]") {
  std::string why;
  if (!test::vulkan_device(&why)) {
    WARN("no Vulkan device: " << why);
    test::note_skipped();
    return;
  }
  const HiddenGolden g = load_hidden_golden("gpt2");
  tern_model* model = test::convert_and_load(g.checkpoint, "hidden_vulkan", convert::ConvertOptions{true});
  tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, model, 1);
  CHECK(tern_session_hidden_size(s) == g.hidden.shape[1]);
  std::vector<float> pooled(static_cast<size_t>(g.hidden.shape[1]));
  CHECK(tern_session_forward_hidden(s, g.ids.data(), int64_t(g.ids.size()), nullptr, pooled.data()) == TERN_UNSUPPORTED);
  CHECK(std::string(tern_session_last_error(s)).find("CPU backend only") != std::string::npos);
  CHECK(tern_session_position(s) == 0);
  tern_session_free(s);
  tern_model_free(model);
}
