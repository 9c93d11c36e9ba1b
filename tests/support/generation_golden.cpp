// SPDX-License-Identifier: MIT
#include "generation_golden.h"

#include <algorithm>
#include <tuple>
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "op_graph.h"
#include "test_support.h"

namespace tern::test {

Generation load_generation(const std::string& dir) {
  Generation gen;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir + "/generation.json"));
  gen.prompt = j.at("prompt").get<int64_t>();
  gen.ids = j.at("ids").get<std::vector<int32_t>>();
  std::string error;
  INFO(error);
  REQUIRE(npy::read_f32(dir + "/generation_logits.npy", &gen.logits, &error));
  REQUIRE(gen.logits.shape[0] == int64_t(gen.ids.size()) - gen.prompt + 1);
  return gen;
}

std::vector<float> generate(tern_model* model, const Generation& gen, int threads, int64_t per_call,
                            int64_t reload_after, tern_backend backend) {
  const int64_t vocab = gen.logits.shape[1], n = int64_t(gen.ids.size());
  tern_session* s = make_session_on(backend, model, threads, n);
  std::vector<float> rows, call(size_t(n * vocab));
  INFO(tern_session_last_error(s));
  REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, call.data()) == TERN_OK);
  rows.insert(rows.end(), call.begin() + (gen.prompt - 1) * vocab, call.begin() + gen.prompt * vocab);
  for (int64_t at = gen.prompt; at < n; at += per_call) {
    if (reload_after > 0 && at == gen.prompt + reload_after) {
      const std::vector<uint8_t> blob = saved_state(s);
      tern_session_free(s);
      s = make_session_on(backend, model, threads, n);
      INFO(tern_session_last_error(s));
      REQUIRE(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
    }
    const int64_t len = std::min(per_call, n - at);
    INFO("at " << at << ": " << tern_session_last_error(s));
    REQUIRE(tern_session_append(s, gen.ids.data() + at, len, call.data()) == TERN_OK);
    rows.insert(rows.end(), call.begin(), call.begin() + len * vocab);
  }
  tern_session_free(s);
  return rows;
}

void check_generation(tern_model* model, const Generation& gen, const std::string& name, double tolerance,
                      tern_backend backend) {
  const int64_t vocab = gen.logits.shape[1];
  const bool cpu = backend == TERN_BACKEND_CPU;
  for (auto [threads, per_call, reload] : {std::tuple{1, 1, 0}, std::tuple{2, 1, 0}, std::tuple{1, 7, 0},
                                           std::tuple{2, 1, 20}}) {
    if (!cpu && threads == 2 && reload == 0) continue;  // threads are the CPU's
    const std::vector<float> got = generate(model, gen, threads, int64_t(per_call), int64_t(reload), backend);
    REQUIRE(got.size() == gen.logits.data.size());
    const double err = relative_error(got.data(), gen.logits.data.data(), got.size());
    const double row = worst_row_error(got, gen.logits.data, vocab);
    INFO(name << " on " << backend_name(backend) << ", threads " << threads << ", " << per_call
              << " per call, reload after " << reload
              << ": relative error " << err << ", worst step " << row);
    CHECK(err <= tolerance);
    CHECK(row <= tolerance);
  }
}

void check_forward_only(tern_model* model, const Generation& gen, const std::vector<float>& prompt_logits) {
  const int64_t n = int64_t(gen.ids.size()), vocab = gen.logits.shape[1];
  tern_session_options so;
  tern_session_options_init(&so);
  so.weight_storage = TERN_WEIGHT_STORAGE_F32;
  so.threads = 1;
  so.max_tokens = n;
  so.forward_only = 1;
  tern_session* s = nullptr;
  REQUIRE(tern_session_create(model, &so, &s) == TERN_OK);
  tern_memory_plan plan{}, used{};
  REQUIRE(tern_session_plan(s, n, &plan) == TERN_OK);
  REQUIRE(tern_session_memory(s, &used) == TERN_OK);
  CHECK(plan.state_bytes == 0);
  CHECK(used.state_bytes == 0);
  std::vector<float> again(size_t(n * vocab));
  REQUIRE(tern_session_forward(s, gen.ids.data(), gen.prompt, again.data()) == TERN_OK);
  REQUIRE(prompt_logits.size() >= size_t(gen.prompt * vocab));
  CHECK(std::equal(again.begin(), again.begin() + long(gen.prompt * vocab), prompt_logits.begin()));
  CHECK(tern_session_append(s, gen.ids.data() + gen.prompt, 1, again.data()) == TERN_UNSUPPORTED);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("forward_only"));
  tern_session_free(s);
}

double worst_row_error(const std::vector<float>& got, const std::vector<float>& want, int64_t vocab) {
  double worst = 0;
  for (size_t r = 0; r < got.size() / size_t(vocab); ++r) {
    worst = std::max(worst, relative_error(got.data() + r * size_t(vocab), want.data() + r * size_t(vocab),
                                           size_t(vocab)));
  }
  return worst;
}

}  // namespace tern::test
