// SPDX-License-Identifier: MIT
// The shipped bounded-state model, examples/models/kjv-stream (sliding-window attention, w = 128, no positions):
// streamed through one session far past its context, it gives the bits per byte that the PyTorch reference computes
// for the same bytes (tools/reference/sample.py --score --streamed --write-json, the model's reference_streamed.json),
// whatever the segments, and its session's memory does not move while it streams.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert.h"
#include "tern/tern.hpp"
#include "test_support.h"

namespace {

std::string convert_kjv_stream() {
  const std::string out = tern::test::scratch_dir("kjv_stream") + "/kjv-stream.tern";
  tern::convert::ConvertOptions o;
  o.quiet = true;
  const tern::Status st = tern::convert::convert_checkpoint(tern::test::source_path("examples/models/kjv-stream"), out, o);
  INFO(st.message());
  REQUIRE(st.ok());
  return out;
}

// -log2 p(target) from one row of logits (log-softmax in double precision).
double bits(const float* row, int64_t vocab, int32_t target) {
  double mx = row[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, double(row[v]));
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
  return (std::log(sum) + mx - double(row[target])) / std::log(2.0);
}

struct Streamed {
  double bits_per_byte = 0;
  tern_memory_plan before{}, after{};
  int64_t sequence_limit = 0;
};

// The bytes as one stream, `segment` tokens per append; every byte after the first predicted once.
Streamed stream(const tern::ModelHandle& model, const std::vector<int32_t>& ids, int64_t segment, int threads) {
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = threads;
  so.max_batch = segment;
  tern::Error err;
  tern::SessionHandle session = tern::SessionHandle::create(model, so, &err);
  INFO(err.message);
  REQUIRE(!err);
  Streamed r;
  r.sequence_limit = tern_session_sequence_limit(session.get());
  REQUIRE(tern_session_memory(session.get(), &r.before) == TERN_OK);
  const int64_t n = int64_t(ids.size()), vocab = session.vocab_size();
  std::vector<float> logits(size_t(segment * vocab));
  double total = 0;
  for (int64_t start = 0; start < n; start += segment) {
    const int64_t len = std::min(segment, n - start);
    err = session.append(ids.data() + start, len, logits.data());
    INFO(err.message);
    REQUIRE(!err);
    for (int64_t i = 0; i < len && start + i + 1 < n; ++i) total += bits(logits.data() + i * vocab, vocab, ids[size_t(start + i + 1)]);
  }
  REQUIRE(tern_session_memory(session.get(), &r.after) == TERN_OK);
  r.bits_per_byte = total / double(n - 1);
  return r;
}

}  // namespace

TEST_CASE("kjv-stream: held-out text streamed past the context matches the PyTorch reference in constant memory",
          "[models][streaming]") {
  const nlohmann::json ref = nlohmann::json::parse(
      tern::test::read_file(tern::test::source_path("examples/models/kjv-stream/reference_streamed.json")));
  const size_t n_bytes = ref.at("bytes").get<size_t>();
  const double want = ref.at("bits_per_byte").get<double>();
  std::string text = tern::test::read_file(tern::test::source_path("examples/models/kjv-byte/heldout.txt"));
  REQUIRE(text.size() >= n_bytes);
  text.resize(n_bytes);

  tern::Error err;
  tern::ModelHandle model = tern::ModelHandle::load(convert_kjv_stream(), &err);
  REQUIRE(!err);
  std::vector<int32_t> ids;
  REQUIRE(!tern::tokenize(model, text, &ids));
  REQUIRE(ids.size() == n_bytes);
  tern_model_info info{};
  REQUIRE(tern_model_get_info(model.get(), &info) == TERN_OK);
  REQUIRE(int64_t(n_bytes) >= 16 * info.max_context);  // sixteen times the context a session is sized for

  const Streamed a = stream(model, ids, 256, 2);
  INFO("Tern " << a.bits_per_byte << " bits per byte, PyTorch " << want);
  CHECK(std::fabs(a.bits_per_byte - want) <= 1e-4 * want);
  CHECK(a.bits_per_byte < 4.0);  // a trained model: one that learnt nothing gives about 8
  CHECK(a.sequence_limit > int64_t(n_bytes));
  // Nothing grew while streaming: the state is one window's ring per layer.
  CHECK(a.after.state_bytes == a.before.state_bytes);
  CHECK(a.after.arena_bytes == a.before.arena_bytes);
  CHECK(a.before.state_bytes <= uint64_t(4 * 2 * 128 * 256 * 4));  // layers x (k, v) x window x d x float32

  // Other cuts of the same stream, on one thread: the same numbers up to float32 rounding.
  const Streamed b = stream(model, ids, 100, 1);
  CHECK(std::fabs(b.bits_per_byte - a.bits_per_byte) <= 1e-6 * a.bits_per_byte);
}
