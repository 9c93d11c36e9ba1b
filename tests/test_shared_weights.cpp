// SPDX-License-Identifier: MIT
// Float32 weights packed once per model (cpu/packed_weights.h): sessions of one model, created from several threads
// at once, hold one packed copy of each matrix and give the logits of a session of its own; the copy goes with the
// last session. On kjv-byte (examples/models/kjv-byte), whose float32 matrices pack into about 11 MB, and on the
// matrices kernels derive from weights: a Reformer's folded LSH layers (per-head columns of the output projection)
// and Transformer-XL's adaptive log-softmax (transposed projections), from the goldens' checkpoints; and kjv-byte's
// int8 and int4 matrices, packed for the int8 GEMM where the kernel variant packs them. Packing reads a file-loaded
// model through the file and a buffer-loaded one from memory: the same bits.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <unistd.h>
#include <vector>

#include "convert.h"
#include "core/session.h"
#include "cpu/isa.h"
#include "cpu/packed_weights.h"
#include "format/model.h"
#include "test_support.h"

using namespace tern;

namespace {

// Resident bytes now (/proc/self/statm's second field, in pages); 0 where it cannot be read.
uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int read = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return read == 2 ? uint64_t(resident) * uint64_t(sysconf(_SC_PAGESIZE)) : 0;
}

// The checkpoint at `source` (relative to the source tree) converted into the test's scratch directory as `name`.
std::string converted(const std::string& source, const std::string& name) {
  const std::string out = test::scratch_dir("shared_weights") + "/" + name + ".tern";
  convert::ConvertOptions opts;
  opts.quiet = true;
  const Status st = convert::convert_checkpoint(test::source_path(source), out, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  return out;
}

std::string kjv_byte() { return converted("examples/models/kjv-byte", "kjv-byte"); }

std::unique_ptr<Model> load(const std::string& path) {
  auto model = Model::load_file(path);
  REQUIRE(model.ok());
  return std::move(model).value();
}

tern_session_options cpu_options() {
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = TERN_BACKEND_CPU;
  so.threads = 1;
  so.max_tokens = 64;
  return so;
}

// `count` sessions of `model`, created from `count` threads at once.
std::vector<std::unique_ptr<Session>> create_at_once(const Model& model, int count) {
  std::vector<std::unique_ptr<Session>> sessions{size_t(count)};
  std::vector<Status> made{size_t(count)};
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      auto s = Session::create(model, cpu_options());
      made[size_t(i)] = s.status();
      if (s.ok()) sessions[size_t(i)] = std::move(s).value();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& st : made) {
    INFO(st.message());
    REQUIRE(st.ok());
  }
  return sessions;
}

std::vector<float> logits_of(Session& s, const std::vector<int32_t>& ids, int64_t vocab) {
  std::vector<float> logits(ids.size() * size_t(vocab));
  REQUIRE(s.forward(ids.data(), int64_t(ids.size()), logits.data()).ok());
  return logits;
}

// 4 sessions of the model at `path`, created at once, hold the packed copies of one session (the packed bytes a
// session counts are in the model's cache, but for `own_tables` bytes of tables each session computes for itself)
// and give its logits bit for bit; the copies go with the last session. Returns one session's packed bytes.
uint64_t check_one_copy_for_all(const std::string& path, int64_t tokens, uint64_t own_tables = 0) {
  std::vector<int32_t> ids;

  // A session on a model of its own: the reference logits and what one session's packed copies take.
  std::vector<float> alone;
  uint64_t one_copy = 0;
  size_t matrices = 0;
  {
    std::unique_ptr<Model> model = load(path);
    auto s = Session::create(*model, cpu_options());
    REQUIRE(s.ok());
    one_copy = s.value()->allocated().packed_weight_bytes;
    matrices = cpu::packed_weights(*model).live_copies();
    REQUIRE(cpu::packed_weights(*model).live_bytes() + own_tables == one_copy);
    ids = test::random_ids(tokens, model->vocab_size(), 5);
    alone = logits_of(*s.value(), ids, model->vocab_size());
  }
  INFO("one session's packed weights: " << one_copy << " bytes in " << matrices << " matrices");
  REQUIRE(matrices > 0);

  std::unique_ptr<Model> model = load(path);
  const cpu::PackedWeights& cache = cpu::packed_weights(*model);
  std::vector<std::unique_ptr<Session>> sessions = create_at_once(*model, 4);
  CHECK(cache.live_copies() == matrices);
  CHECK(cache.live_bytes() + own_tables == one_copy);
  for (auto& s : sessions) {
    CHECK(s->allocated().packed_weight_bytes == one_copy);  // each session counts the copy it uses
    const std::vector<float> logits = logits_of(*s, ids, model->vocab_size());
    CHECK(std::memcmp(logits.data(), alone.data(), alone.size() * sizeof(float)) == 0);
  }

  // The copies live while any session does, and go with the last.
  sessions.resize(1);
  CHECK(cache.live_bytes() + own_tables == one_copy);
  sessions.clear();
  CHECK(cache.live_copies() == 0);
  CHECK(cache.live_bytes() == 0);
  return one_copy;
}

}  // namespace

TEST_CASE("Sessions of one model created at once share one packed copy and give one session's logits",
          "[shared_weights]") {
  CHECK(check_one_copy_for_all(kjv_byte(), 40) > 8000000);  // kjv-byte's float32 matrices
}

TEST_CASE("Matrices derived from weights are packed once per model too", "[shared_weights]") {
  SECTION("a Reformer's folded LSH layers") {
    check_one_copy_for_all(converted("tests/goldens/reformer_mixed_factorized", "reformer"), 64);
  }
  SECTION("Transformer-XL's adaptive log-softmax with projections") {
    // Each session's position tables: per layer r(p) [P, n_head * d_head] and v . r(p) [P, n_head] for
    // P = clamp_len + 1 positions (2 layers, clamp_len 20, 4 heads of 8).
    const uint64_t position_tables = 2 * (20 + 1) * (4 * 8 + 4) * sizeof(float);
    check_one_copy_for_all(converted("tests/goldens/transfo_xl_adaptive", "transfo-xl"), 16, position_tables);
  }
}

TEST_CASE("Int8 and int4 matrices are packed once per model too, where the kernels pack them", "[shared_weights]") {
  const bool packs = cpu::isa().qgemm_nr > 0 && cpu::isa().qgemm_min_rows_i8 < INT64_MAX;
  for (const auto format : {convert::WeightFormat::kInt8, convert::WeightFormat::kInt4}) {
    const bool int8 = format == convert::WeightFormat::kInt8;
    const std::string out = test::scratch_dir("shared_weights") + (int8 ? "/kjv-int8.tern" : "/kjv-int4.tern");
    convert::ConvertOptions opts;
    opts.quiet = true;
    opts.weights.format = format;
    const Status st = convert::convert_checkpoint(test::source_path("examples/models/kjv-byte"), out, opts);
    INFO(st.message());
    REQUIRE(st.ok());
    INFO((int8 ? "int8" : "int4") << ", kernels " << cpu::isa().name);
    if (!packs) {  // read in place: nothing packed, nothing shared
      std::unique_ptr<Model> model = load(out);
      auto s = Session::create(*model, cpu_options());
      REQUIRE(s.ok());
      CHECK(s.value()->allocated().packed_weight_bytes == 0);
      continue;
    }
    // kjv-byte's matrices (2.8 M weights): over a byte a weight for int8, over half a byte for int4.
    CHECK(check_one_copy_for_all(out, 40) > (int8 ? 2500000u : 1300000u));
  }
}

TEST_CASE("Sessions after the first add no packed copy to resident memory", "[shared_weights]") {
  if (!test::kRssIsTern) {
    SUCCEED("resident memory is the sanitizer's here");
    return;
  }
  const std::string path = kjv_byte();
  std::unique_ptr<Model> model = load(path);
  auto first = Session::create(*model, cpu_options());
  REQUIRE(first.ok());
  const tern_memory_plan one = first.value()->allocated();
  const uint64_t before = resident_bytes();
  std::vector<std::unique_ptr<Session>> more = create_at_once(*model, 3);
  const uint64_t after = resident_bytes();
  REQUIRE(before > 0);
  INFO("resident before sessions 2..4: " << before << ", after: " << after << "; one session's packed weights "
                                         << one.packed_weight_bytes << ", arena " << one.arena_bytes << ", state "
                                         << one.state_bytes);
  // Three sessions' own buffers (arena and state, written at creation) and thread stacks, not three packed copies.
  const uint64_t own = 3 * (one.arena_bytes + one.state_bytes) + (uint64_t(4) << 20);
  CHECK(after - std::min(after, before) <= own);
  CHECK(after - std::min(after, before) < one.packed_weight_bytes / 2);
}

// Packing reads a file-loaded model's rows from the file (Model::read_bytes, pread) and a buffer-loaded model's from
// memory: the same matrices, so the same logits bit for bit; and the reads leave the file's pages out of memory.
TEST_CASE("Packed weights read from the file equal those read from memory", "[shared_weights]") {
  const std::string path = kjv_byte();
  const std::string bytes = test::read_file(path);
  std::unique_ptr<Model> from_file = load(path);
  auto from_memory = Model::load_buffer(bytes.data(), bytes.size());
  REQUIRE(from_memory.ok());
  const std::vector<int32_t> ids = test::random_ids(24, from_file->vocab_size(), 11);
  auto a = Session::create(*from_file, cpu_options());
  auto b = Session::create(*from_memory.value(), cpu_options());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const std::vector<float> la = logits_of(*a.value(), ids, from_file->vocab_size());
  const std::vector<float> lb = logits_of(*b.value(), ids, from_file->vocab_size());
  REQUIRE(la.size() == lb.size());
  CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
}

TEST_CASE("MappedFile::read copies a mapped file's bytes, also after release, and borrowed memory's", "[shared_weights]") {
  std::string bytes(size_t(3) << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char((i * 2654435761u) >> 13);
  const std::string path = test::scratch_dir("shared_weights") + "/mapped_read.bin";
  test::write_file(path, bytes);
  auto mapped = MappedFile::open(path);
  REQUIRE(mapped.ok());
  const std::unique_ptr<MappedFile> borrowed = MappedFile::borrow(bytes.data(), bytes.size());
  const MappedFile* files[2] = {mapped.value().get(), borrowed.get()};
  const size_t ranges[][2] = {{0, 1}, {4095, 2}, {12345, 1 << 20}, {bytes.size() - 7, 7}, {0, bytes.size()}};
  for (const MappedFile* f : files) {
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& r : ranges) {
        INFO((f == borrowed.get() ? "borrowed" : "mapped") << ", pass " << pass << ", [" << r[0] << ", +" << r[1] << ")");
        std::string out(r[1], '\0');
        f->read(f->data() + r[0], r[1], out.data());
        CHECK(out == bytes.substr(r[0], r[1]));
      }
      f->release(f->data(), f->size());  // the second pass reads after the pages were dropped
    }
  }
}
