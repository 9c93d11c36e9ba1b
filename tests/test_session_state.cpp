// SPDX-License-Identifier: MIT
// Saving and restoring a session's streaming state (tern_session_save_state / tern_session_load_state), on each
// backend: for every kind of state (dense and windowed KV stores, adaptive-span rings, Transformer-XL memory,
// compressive memories), stream part of a golden's ids, save, restore into a new session and continue: the outputs
// are bit-identical to an uninterrupted session. Both backends save the CPU kernels' bytes, so a state saved on one
// continues on the other. Blobs from another model, for another configuration, truncated, corrupt or in a layout
// neither backend reads are rejected and change nothing.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "cli.h"
#include "convert.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"

namespace {

struct Case {
  const char* golden;
  int64_t segment;  // tokens per append
};

// Dense, sliding, chunked, fixed (ring + summaries), strided, adaptive span, Transformer-XL, compressive memory.
const Case kCases[] = {{"pre_tied_learned_gelu", 37}, {"sliding_w64", 50}, {"chunked_c128", 100},
                       {"fixed_merged", 45},          {"strided_split", 33}, {"adaptive_span_learned", 64},
                       {"transfo_xl_adaptive", 16},   {"transfo_xl_plain", 12},  {"compressive_conv_mean", 16},
                       {"compressive_max_conv_post", 7}};

tern_model* convert_golden(const std::string& name) {
  const std::string dir = tern::test::source_path("tests/goldens/" + name);
  const std::string out = tern::test::scratch_dir("state_" + name) + "/model.tern";
  tern::convert::ConvertOptions o;
  o.quiet = true;
  tern::Status st = tern::convert::convert_checkpoint(dir, out, o);
  INFO(st.message());
  REQUIRE(st.ok());
  tern_model* m = nullptr;
  REQUIRE(tern_model_load(out.c_str(), &m) == TERN_OK);
  return m;
}

std::vector<int32_t> golden_ids(const std::string& name) {
  std::vector<int32_t> ids;
  std::string error;
  INFO(error);
  REQUIRE(tern::cli::read_ids_json(tern::test::source_path("tests/goldens/" + name + "/ids.json"), &ids, &error));
  return ids;
}

tern_session* make_session(tern_backend backend, tern_model* model, int64_t max_tokens, int64_t max_batch) {
  return tern::test::make_session_on(backend, model, 2, max_tokens, max_batch);
}

// Appends ids[from, to) `segment` at a time; returns the outputs.
std::vector<float> run(tern_session* s, const std::vector<int32_t>& ids, int64_t from, int64_t to, int64_t segment) {
  const int64_t V = tern_session_vocab_size(s);
  std::vector<float> out(size_t((to - from) * V));
  for (int64_t pos = from; pos < to; pos += segment) {
    const int64_t len = std::min(segment, to - pos);
    INFO(tern_session_last_error(s));
    REQUIRE(tern_session_append(s, ids.data() + pos, len, out.data() + (pos - from) * V) == TERN_OK);
  }
  return out;
}


}  // namespace

TEST_CASE("session state: save, restore into a new session, continue: bit-identical outputs", "[session][state]") {
  TERN_EACH_BACKEND(backend);
  for (const Case& c : kCases) {
    tern_model* model = convert_golden(c.golden);
    const std::vector<int32_t> ids = golden_ids(c.golden);
    // Enough to fill every window and memory (fewer on Vulkan: lavapipe, the software device of CI, is slow).
    const auto n = std::min<int64_t>(int64_t(ids.size()), backend == TERN_BACKEND_VULKAN ? 200 : 320);
    const int64_t cut = (n / 2) / c.segment * c.segment;            // on a segment boundary
    const int64_t max_tokens = n;
    INFO(c.golden);
    tern_session* a = make_session(backend, model, max_tokens, c.segment);
    run(a, ids, 0, cut, c.segment);
    const std::vector<uint8_t> blob = tern::test::saved_state(a);
    const std::vector<float> want = run(a, ids, cut, n, c.segment);  // uninterrupted

    tern_session* b = make_session(backend, model, max_tokens, c.segment);
    run(b, ids, 0, c.segment, c.segment);  // some other state first: the load replaces it
    INFO(c.golden << ": " << tern_session_last_error(b));
    REQUIRE(tern_session_load_state(b, blob.data(), blob.size()) == TERN_OK);
    CHECK(tern_session_position(b) == cut);
    const std::vector<float> got = run(b, ids, cut, n, c.segment);
    CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);

    // The same session can go back to the saved point too.
    REQUIRE(tern_session_load_state(a, blob.data(), blob.size()) == TERN_OK);
    const std::vector<float> again = run(a, ids, cut, n, c.segment);
    CHECK(std::memcmp(again.data(), want.data(), again.size() * sizeof(float)) == 0);
    tern_session_free(a);
    tern_session_free(b);
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(tern::test::vulkan_validation_messages() == 0);
}

// Both backends save the CPU kernels' bytes: a state saved on one continues on the other, within the Vulkan bound of
// the CPU path (the states differ by the backends' rounding only).
TEST_CASE("session state: saved on one backend, continued on the other", "[session][state][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  const Case cases[] = {{"pre_tied_learned_gelu", 37}, {"sliding_w64", 50}, {"fixed_merged", 45},
                        {"adaptive_span_learned", 64}, {"transfo_xl_plain", 12}, {"compressive_conv_mean", 16}};
  for (const Case& c : cases) {
    tern_model* model = convert_golden(c.golden);
    const std::vector<int32_t> ids = golden_ids(c.golden);
    const auto n = std::min<int64_t>(int64_t(ids.size()), 200);
    const int64_t cut = (n / 2) / c.segment * c.segment;
    for (const tern_backend from : {TERN_BACKEND_CPU, TERN_BACKEND_VULKAN}) {
      const tern_backend to = from == TERN_BACKEND_CPU ? TERN_BACKEND_VULKAN : TERN_BACKEND_CPU;
      INFO(c.golden << ": saved on " << tern::test::backend_name(from) << ", loaded on " << tern::test::backend_name(to));
      tern_session* a = make_session(from, model, n, c.segment);
      run(a, ids, 0, cut, c.segment);
      const std::vector<uint8_t> blob = tern::test::saved_state(a);
      const std::vector<float> want = run(a, ids, cut, n, c.segment);
      tern_session* b = make_session(to, model, n, c.segment);
      run(b, ids, 0, c.segment, c.segment);
      INFO(tern_session_last_error(b));
      REQUIRE(tern_session_load_state(b, blob.data(), blob.size()) == TERN_OK);
      CHECK(tern_session_position(b) == cut);
      // The same entries (ops, layout 0, sizes) as the other backend saved.
      const std::vector<uint8_t> again = tern::test::saved_state(b);
      uint32_t entries = 0;
      std::memcpy(&entries, blob.data() + 12, 4);
      REQUIRE(again.size() == blob.size());
      CHECK(std::memcmp(again.data(), blob.data(), 40) == 0);  // header up to the checksum
      CHECK(std::memcmp(again.data() + 48, blob.data() + 48, 16 * size_t(entries)) == 0);
      const std::vector<float> got = run(b, ids, cut, n, c.segment);
      CHECK(tern::test::relative_error(got.data(), want.data(), got.size()) <= 1e-4);
      tern_session_free(a);
      tern_session_free(b);
    }
    tern_model_free(model);
  }
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("session state: a blob from another model or configuration, truncated or corrupt, is rejected", "[session][state]") {
  TERN_EACH_BACKEND(backend);
  tern_model* xl = convert_golden("transfo_xl_adaptive");
  tern_model* dense = convert_golden("pre_tied_learned_gelu");
  const std::vector<int32_t> xl_ids = golden_ids("transfo_xl_adaptive");
  const std::vector<int32_t> dense_ids = golden_ids("pre_tied_learned_gelu");
  tern_session* s = make_session(backend, xl, 1000, 16);
  run(s, xl_ids, 0, 32, 16);
  const std::vector<uint8_t> blob = tern::test::saved_state(s);

  size_t small = blob.size() - 1;
  std::vector<uint8_t> buf(small);
  CHECK(tern_session_save_state(s, buf.data(), &small) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("the state needs"));

  // Every rejection leaves the session where it was: 48 tokens in, whatever it was fed.
  run(s, xl_ids, 32, 48, 16);
  auto rejects = [&](tern_session* target, const std::vector<uint8_t>& bad, const std::string& message) {
    const int64_t before = tern_session_position(target);
    CHECK(tern_session_load_state(target, bad.data(), bad.size()) == TERN_INVALID_ARGUMENT);
    CHECK_THAT(std::string(tern_session_last_error(target)), Catch::Contains(message));
    CHECK(tern_session_position(target) == before);
  };
  std::vector<uint8_t> bad = blob;
  bad[0] = 'X';
  rejects(s, bad, "not a Tern session state");
  rejects(s, std::vector<uint8_t>(blob.begin(), blob.end() - 5), "truncated");
  bad = blob;
  bad[bad.size() / 2] ^= 0x40;
  rejects(s, bad, "corrupt (checksum mismatch)");
  bad = blob;
  bad[30] ^= 0x01;  // the position field: covered by the checksum
  rejects(s, bad, "corrupt");
  // An entry's layout (the u32 after its op index) other than 0, the CPU kernels' bytes both backends write, and 1,
  // their float16 keys and values (kv_storage F16: tests/test_kv_storage.cpp); the last entry's, so that the ops
  // before it pass every check first.
  uint32_t entries = 0;
  std::memcpy(&entries, blob.data() + 12, 4);
  bad = blob;
  bad[48 + 16 * size_t(entries - 1) + 4] = 2;
  tern::test::reseal_state(&bad);
  rejects(s, bad, "has layout 2");
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("CPU and Vulkan backends"));

  // The state itself is unchanged too: the session continues as one that saw no load at all.
  tern_session* plain = make_session(backend, xl, 1000, 16);
  run(plain, xl_ids, 0, 48, 16);
  const std::vector<float> want = run(plain, xl_ids, 48, 64, 16);
  const std::vector<float> got = run(s, xl_ids, 48, 64, 16);
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  tern_session_free(plain);

  tern_session* other = make_session(backend, dense, 1024, 64);
  run(other, dense_ids, 0, 64, 64);
  rejects(other, blob, "saved from a different model");

  // Dense attention keeps every key up to max_tokens; a smaller session cannot hold a longer state.
  const std::vector<uint8_t> dense_blob = tern::test::saved_state(other);
  tern_session* tiny = make_session(backend, dense, 32, 32);
  rejects(tiny, dense_blob, "max_tokens is 32");
  // A larger max_tokens holds it: dense and strided states save only the positions seen.
  tern_session* large = make_session(backend, dense, 1024, 128);
  CHECK(tern_session_load_state(large, dense_blob.data(), dense_blob.size()) == TERN_OK);
  CHECK(tern_session_position(large) == 64);

  // The state is still good after all that.
  CHECK(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
  CHECK(tern_session_position(s) == 32);
  CHECK(tern_session_load_state(s, nullptr, 10) == TERN_INVALID_ARGUMENT);
  CHECK(tern_session_save_state(s, nullptr, nullptr) == TERN_INVALID_ARGUMENT);
  for (tern_session* t : {s, other, tiny, large}) tern_session_free(t);
  tern_model_free(xl);
  tern_model_free(dense);
  if (backend == TERN_BACKEND_VULKAN) CHECK(tern::test::vulkan_validation_messages() == 0);
}

// A compressive state holds its row counts, which the Vulkan backend derives from the position: a blob whose counts
// are not those of its position (only a forged one) is rejected there before anything changes.
TEST_CASE("session state: Vulkan rejects compressive row counts that are not its position's", "[session][state][vulkan]") {
  TERN_SKIP_WITHOUT_VULKAN();
  tern_model* model = convert_golden("compressive_conv_mean");
  const std::vector<int32_t> ids = golden_ids("compressive_conv_mean");
  tern_session* s = make_session(TERN_BACKEND_VULKAN, model, 128, 16);
  run(s, ids, 0, 64, 16);
  const std::vector<uint8_t> blob = tern::test::saved_state(s);
  uint32_t entries = 0;
  std::memcpy(&entries, blob.data() + 12, 4);
  std::vector<uint8_t> bad = blob;
  bad[48 + 16 * size_t(entries)] ^= 0x01;  // the first op's |mem|
  tern::test::reseal_state(&bad);
  run(s, ids, 64, 80, 16);
  CHECK(tern_session_load_state(s, bad.data(), bad.size()) == TERN_INVALID_ARGUMENT);
  CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains("row counts"));
  CHECK(tern_session_position(s) == 80);
  CHECK(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
  CHECK(tern_session_position(s) == 64);
  tern_session_free(s);
  tern_model_free(model);
  CHECK(tern::test::vulkan_validation_messages() == 0);
}

TEST_CASE("session state: the Transformer-XL blob holds the memory and no more", "[session][state][transfo_xl]") {
  TERN_EACH_BACKEND(backend);
  tern_model* model = convert_golden("transfo_xl_adaptive");
  const std::vector<int32_t> ids = golden_ids("transfo_xl_adaptive");
  tern_session* s = make_session(backend, model, 1 << 20, 16);
  size_t early = 0, late = 0;
  run(s, ids, 0, 16, 16);
  REQUIRE(tern_session_save_state(s, nullptr, &early) == TERN_OK);
  for (int k = 0; k < 50; ++k) run(s, ids, 0, 80, 16);
  REQUIRE(tern_session_save_state(s, nullptr, &late) == TERN_OK);
  CHECK(early == late);
  const size_t memory = 2 * 24 * 32 * sizeof(float);  // layers x mem_len x d_model
  CHECK(early == memory + 48 + 2 * 16);                // header and one entry per layer
  tern_session_free(s);
  tern_model_free(model);
  if (backend == TERN_BACKEND_VULKAN) CHECK(tern::test::vulkan_validation_messages() == 0);
}

// The checksum guards against accidents, not forgery: a blob resealed around a NaN or an infinity in any kind of
// state (keys, values, rings, memories) is rejected by the value check, and the session is left where it was.
TEST_CASE("session state: a forged blob with a NaN or an infinity is rejected, whatever the state", "[session][state]") {
  TERN_EACH_BACKEND(backend);
  for (const Case& c : kCases) {
    INFO(c.golden);
    tern_model* model = convert_golden(c.golden);
    const std::vector<int32_t> ids = golden_ids(c.golden);
    tern_session* s = make_session(backend, model, 4 * c.segment, c.segment);
    run(s, ids, 0, 2 * c.segment, c.segment);
    const std::vector<uint8_t> blob = tern::test::saved_state(s);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = -std::numeric_limits<float>::infinity();
    for (const auto& [value, words] : {std::pair{nan, "holds NaN"}, std::pair{inf, "holds an infinity"}}) {
      std::vector<uint8_t> bad = blob;
      std::memcpy(bad.data() + bad.size() - sizeof(float), &value, sizeof value);  // the last op's last row
      tern::test::reseal_state(&bad);
      CHECK(tern_session_load_state(s, bad.data(), bad.size()) == TERN_INVALID_ARGUMENT);
      CHECK_THAT(std::string(tern_session_last_error(s)), Catch::Contains(words));
      CHECK(tern_session_position(s) == 2 * c.segment);
    }
    CHECK(tern_session_load_state(s, blob.data(), blob.size()) == TERN_OK);
    tern_session_free(s);
    tern_model_free(model);
  }
  if (backend == TERN_BACKEND_VULKAN) CHECK(tern::test::vulkan_validation_messages() == 0);
}
