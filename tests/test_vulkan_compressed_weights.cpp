// SPDX-License-Identifier: MIT
// Compressed weights (F16, I8, I4 in the .tern file) on the Vulkan backend: LINEAR weights and EMBEDDING tables read
// as stored (linear_f16 / _i8 / _i4, embedding likewise), any other compressed weight widened while staging. Each
// case compares the compressed model on Vulkan against its float32 "twin": the float32 conversion of the same
// checkpoint with every compressed tensor's bytes replaced by core/dequantize's widening of the compressed model's
// tensor, run on the CPU. The two compute on the same float32 values, so they agree to float32 rounding of the sums.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "compress.h"
#include "convert.h"
#include "format/dequantize.h"
#include "format/model.h"
#include "op_graph.h"
#include "tern/tern.h"
#include "test_support.h"
#include "writer.h"

using namespace tern;
using tern::test::relative_error;

namespace {

constexpr double kTolerance = 1e-4;


struct Format {
  const char* name;
  convert::WeightFormat format;
  int64_t group;  // -1: the format's default
};
const Format kFormats[] = {{"f16", convert::WeightFormat::kF16, -1},
                           {"int8", convert::WeightFormat::kInt8, -1},
                           {"int4", convert::WeightFormat::kInt4, -1}};

// The float32 twin of compressed_path (test::write_dequantised_twin) next to f32_path; *compressed_tensors counts
// the tensors replaced.
std::string write_twin(const std::string& compressed_path, const std::string& f32_path, int* compressed_tensors) {
  const std::string out = f32_path + ".twin.tern";
  test::write_dequantised_twin(f32_path, compressed_path, out, compressed_tensors);
  return out;
}

uint64_t device_weight_bytes(tern_session* s) {
  tern_memory_plan m{};
  REQUIRE(tern_session_memory(s, &m) == TERN_OK);
  return m.packed_weight_bytes;
}

tern_model* load(const std::string& path) {
  tern_model* m = nullptr;
  INFO(path << ": " << tern_last_error());
  REQUIRE(tern_model_load(path.c_str(), &m) == TERN_OK);
  return m;
}

// The golden's checkpoint converted as `fmt` and as float32; the compressed model on Vulkan against the twin on the
// CPU over the first (at most) 128 ids, segment by segment where the model records a segment length.
// no_16bit_storage: the device acts as one without storageBuffer16BitAccess (TERN_VULKAN_NO_16BIT_STORAGE), so
// float16 weights are widened to float32 while staging (Lowering::weight, the fallback every op has).
void check_golden(const std::string& name, const Format& fmt, bool no_16bit_storage = false) {
  INFO("golden " << name << ", weights " << fmt.name << (no_16bit_storage ? ", no 16-bit storage" : ""));
  const std::string dir = test::source_path("tests/goldens/" + name);
  std::vector<int32_t> ids;
  std::string error;
  REQUIRE(cli::read_ids_json(dir + "/ids.json", &ids, &error));
  if (ids.size() > 128) ids.resize(128);
  const std::string scratch = test::scratch_dir("vk_compressed_" + name + "_" + fmt.name);
  convert::ConvertOptions opts;
  opts.quiet = true;
  const std::string f32_path = scratch + "/f32.tern", packed_path = scratch + "/packed.tern";
  Status st = convert::convert_checkpoint(dir, f32_path, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  opts.weights.format = fmt.format;
  opts.weights.group = fmt.group;
  st = convert::convert_checkpoint(dir, packed_path, opts);
  INFO(st.message());
  REQUIRE(st.ok());
  int replaced = 0;
  const std::string twin_path = write_twin(packed_path, f32_path, &replaced);
  CHECK(replaced > 0);  // the golden has matrices the format compresses

  int64_t segment = 0, vocab = 0;
  uint64_t f32_bytes = 0;
  {
    auto m = Model::load_file(twin_path);
    REQUIRE(m.ok());
    segment = m.value()->segment_length();
    vocab = m.value()->vocab_size();
    f32_bytes = m.value()->weight_bytes();
  }
  tern_model* twin = load(twin_path);
  tern_model* packed = load(packed_path);
  const auto want = test::run_on(TERN_BACKEND_CPU, twin, ids, vocab, segment, 2);
  std::unique_ptr<test::EnvOverride> no16;
  if (no_16bit_storage) no16 = std::make_unique<test::EnvOverride>("TERN_VULKAN_NO_16BIT_STORAGE", "1");
  tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, packed, 1, int64_t(ids.size()), segment);
  no16.reset();
  const auto got = test::run_ids(s, ids, vocab, segment);
  const double err = relative_error(got.data(), want.data(), want.size());
  const uint64_t bytes = device_weight_bytes(s);
  INFO(replaced << " tensors compressed; relative error vs the float32 twin on the CPU " << err << "; device weight bytes "
                << bytes << " (the float32 file's " << f32_bytes << ")");
  CHECK(err <= kTolerance);
  if (no_16bit_storage) {
    CHECK(bytes <= f32_bytes);  // widened: as many floats as the float32 file (fewer where a table is shared)
  } else {
    CHECK(bytes < f32_bytes);  // the compressed bytes are what is uploaded
  }
  tern_session_free(s);
  tern_model_free(packed);
  tern_model_free(twin);
  CHECK(test::vulkan_validation_messages() == 0);
}

// ids -> EMBEDDING [rows, in] -> LINEAR [out, in] + bias, written as float32 and compressed as `fmt` (table and W
// both compressible and large enough); returns the two paths.
std::pair<std::string, std::string> write_linear_models(int64_t rows, int64_t in, int64_t out, const Format& fmt,
                                                        uint32_t seed) {
  const std::string scratch = test::scratch_dir(std::string("vk_compressed_linear_") + fmt.name + "_" +
                                                std::to_string(seed));
  std::pair<std::string, std::string> paths{scratch + "/f32.tern", scratch + "/packed.tern"};
  for (int packed = 0; packed < 2; ++packed) {
    auto g = test::start_graph(rows, in, seed);
    const int32_t wt = test::add_constant(g, "w", {out, in}, test::random_floats(size_t(out * in), seed + 1));
    const int32_t bt = test::add_constant(g, "b", {out}, test::random_floats(size_t(out), seed + 2));
    const int32_t y = g.graph.add_value("y", fb::DType::F32, out).value();
    REQUIRE(g.graph.add_op(fb::OpCode::LINEAR, "linear", {g.x}, {y}, {wt, bt}, fb::LinearParamsT{}).ok());
    REQUIRE(g.graph.add_output(y).ok());
    g.graph.metadata().architecture = "op-test";
    g.graph.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
    g.graph.metadata().vocab_size = out;
    g.graph.metadata().max_context = 256;
    if (packed) {
      convert::CompressOptions co;
      co.format = fmt.format;
      co.group = fmt.group;
      convert::CompressReport report;
      REQUIRE(convert::compress_weights(g.graph, co, &report).ok());
      REQUIRE(report.compressed == 2);  // the table and W
    }
    convert::WriteOptions wo;
    wo.quiet = true;
    const Status st = convert::write_model(g.graph, packed ? paths.second : paths.first, wo);
    INFO(st.message());
    REQUIRE(st.ok());
  }
  return paths;
}

// The split case: W and the table over a lowered maxStorageBufferRange, bound as parts of whole rows (weights and
// scales at each part's offset), against the twin on the CPU and the unsplit Vulkan run.
void check_split_linear(const Format& fmt, uint32_t seed) {
  const int64_t rows = 100, in = 96, out = 200, n = 16, batch = 2;
  INFO("weights " << fmt.name << ", group " << fmt.group);
  const auto [f32_path, packed_path] = write_linear_models(rows, in, out, fmt, seed);
  int replaced = 0;
  const std::string twin_path = write_twin(packed_path, f32_path, &replaced);
  REQUIRE(replaced == 2);
  uint64_t stored = 0;  // every tensor of the compressed file is uploaded as it is: table, W, their scales, the bias
  {
    auto m = Model::load_file(packed_path);
    REQUIRE(m.ok());
    for (const TensorInfo& t : m.value()->tensors()) stored += t.size;
  }
  tern_model* twin = load(twin_path);
  tern_model* packed = load(packed_path);
  const auto ids = test::random_ids(n, rows, seed + 3);
  const auto want = test::run_on(TERN_BACKEND_CPU, twin, ids, out, batch, 2);
  std::vector<float> whole, split;
  {
    tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, packed, 1, n, batch);
    whole = test::run_ids(s, ids, out, batch);
    CHECK(device_weight_bytes(s) == stored);
    tern_session_free(s);
  }
  {
    // I8 rows of 96 bytes (W 19200, the table 9600), I4 rows of 48 (9600, 4800): parts of 20 and 41 rows at 2000.
    // I4's three float16 scales a row (6 bytes) start every other part's scales at 2 mod 4 bytes.
    test::EnvOverride lowered("TERN_VULKAN_MAX_STORAGE_BUFFER_RANGE", "2000");
    tern_session* s = test::make_session_on(TERN_BACKEND_VULKAN, packed, 1, n, batch);
    split = test::run_ids(s, ids, out, batch);
    CHECK(device_weight_bytes(s) == stored);
    tern_session_free(s);
  }
  const double err_whole = relative_error(whole.data(), want.data(), want.size());
  const double err_split = relative_error(split.data(), want.data(), want.size());
  const double split_vs_whole = relative_error(split.data(), whole.data(), whole.size());
  INFO("vs the float32 twin: whole " << err_whole << ", split " << err_split << "; split vs whole " << split_vs_whole);
  CHECK(err_whole <= kTolerance);
  CHECK(err_split <= kTolerance);
  CHECK(split_vs_whole <= 1e-6);  // each output column sums over k in the same order, split or not
  tern_model_free(packed);
  tern_model_free(twin);
  CHECK(test::vulkan_validation_messages() == 0);
}

// Several 64-token blocks of the GEMM and an out past a 64-column block, in one call, against the twin on the CPU.
void check_linear_blocks(const Format& fmt, uint32_t seed) {
  const int64_t rows = 100, in = 96, out = 200, n = 150;
  INFO("weights " << fmt.name << ", group " << fmt.group);
  const auto [f32_path, packed_path] = write_linear_models(rows, in, out, fmt, seed);
  int replaced = 0;
  const std::string twin_path = write_twin(packed_path, f32_path, &replaced);
  REQUIRE(replaced == 2);
  tern_model* twin = load(twin_path);
  tern_model* packed = load(packed_path);
  const auto ids = test::random_ids(n, rows, seed + 3);
  const auto want = test::run_on(TERN_BACKEND_CPU, twin, ids, out, 0, 2);
  const auto got = test::run_on(TERN_BACKEND_VULKAN, packed, ids, out, 0, 1);
  const double err = relative_error(got.data(), want.data(), want.size());
  INFO("vs the float32 twin: " << err);
  CHECK(err <= kTolerance);
  tern_model_free(packed);
  tern_model_free(twin);
  CHECK(test::vulkan_validation_messages() == 0);
}

}  // namespace

TEST_CASE("compressed weights on Vulkan: dense goldens match their float32 twin on the CPU", "[vulkan][compressed]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : {"pre_tied_learned_gelu", "sliding_w64"}) {
    for (const Format& fmt : kFormats) check_golden(name, fmt);
  }
}

TEST_CASE("compressed weights on Vulkan: Reformer and Transformer-XL goldens match their float32 twin on the CPU",
          "[vulkan][compressed]") {
  TERN_SKIP_WITHOUT_VULKAN();
  for (const char* name : {"reformer_hashes_int", "transfo_xl_plain"}) {
    for (const Format& fmt : kFormats) check_golden(name, fmt);
  }
}

TEST_CASE("compressed weights on Vulkan: float16 weights on a device without 16-bit storage are widened",
          "[vulkan][compressed]") {
  TERN_SKIP_WITHOUT_VULKAN();
  check_golden("pre_tied_learned_gelu", kFormats[0], true);
}

TEST_CASE("compressed weights on Vulkan: int8 and int4 weights split over maxStorageBufferRange parts",
          "[vulkan][compressed]") {
  TERN_SKIP_WITHOUT_VULKAN();
  check_split_linear({"int8", convert::WeightFormat::kInt8, -1}, 500);   // one float32 scale a row
  check_split_linear({"int8", convert::WeightFormat::kInt8, 32}, 510);   // three a row
  check_split_linear({"int4", convert::WeightFormat::kInt4, -1}, 520);   // groups of 32: three float16 scales a row
}

TEST_CASE("compressed weights on Vulkan: float16, int8 and int4 linears over several token blocks in one call",
          "[vulkan][compressed]") {
  TERN_SKIP_WITHOUT_VULKAN();
  check_linear_blocks(kFormats[0], 600);
  check_linear_blocks({"int8", convert::WeightFormat::kInt8, 32}, 610);
  check_linear_blocks(kFormats[2], 620);
}
