// SPDX-License-Identifier: MIT
// Loader robustness: a model file is untrusted input. Every hostile file gives a clear error, never a crash.
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <functional>
#include <random>

#include "convert.h"
#include "tern/tern.h"
#include "tern_generated.h"
#include "test_support.h"

using namespace tern;

namespace {

// A valid model to corrupt: the learned-position golden (its context bounds any session it creates), with its
// weights as float32 or compressed.
const std::string& valid_model_bytes(convert::WeightFormat weights = convert::WeightFormat::kF32) {
  static std::string stored[4];
  std::string& bytes = stored[int(weights)];
  if (bytes.empty()) bytes = [weights] {
    std::string out = test::scratch_dir("loader_valid") + "/model.tern";
    convert::ConvertOptions opts;
    opts.quiet = true;
    opts.weights.format = weights;
    Status st = convert::convert_checkpoint(test::source_path("tests/goldens/pre_untied_nobias_gelutanh"), out, opts);
    REQUIRE(st.ok());
    return test::read_file(out);
  }();
  return bytes;
}

struct LoadResult {
  tern_status status;
  std::string message;
};

LoadResult load_bytes(const std::string& bytes, const std::string& name) {
  std::string path = test::scratch_dir("loader_" + name) + "/model.tern";
  test::write_file(path, bytes);
  tern_model* model = nullptr;
  tern_status st = tern_model_load(path.c_str(), &model);
  LoadResult r{st, st == TERN_OK ? "" : tern_last_error()};
  if (model) {
    // A file that loads must also run without crashing.
    tern_session* session = nullptr;
    if (tern_session_create(model, nullptr, &session) == TERN_OK) {
      std::vector<int32_t> ids = {1, 2, 3, 4};
      std::vector<float> logits(ids.size() * size_t(tern_session_vocab_size(session)));
      tern_session_forward(session, ids.data(), int64_t(ids.size()), logits.data());
      tern_session_free(session);
    }
    tern_model_free(model);
  }
  return r;
}

// Re-serialises the valid model after `mutate` changes its graph; the data segment is kept as it was.
std::string rebuild(const std::function<void(fb::ModelT&)>& mutate,
                    convert::WeightFormat weights = convert::WeightFormat::kF32) {
  return test::rebuild_model(valid_model_bytes(weights), mutate);
}

void expect_rejected(const std::string& bytes, const std::string& name, const std::string& words) {
  LoadResult r = load_bytes(bytes, name);
  INFO(name << ": " << r.message);
  CHECK(r.status != TERN_OK);
  CHECK_THAT(r.message, Catch::Contains(words));
}

// The valid model with `copies` extra copies of tensor 0, every tensor's name one shared string of `name_bytes`:
// a small file whose names would expand to copies x name_bytes when copied out.
std::string with_shared_names(size_t copies, size_t name_bytes) {
  const std::string& src = valid_model_bytes();
  uint32_t fb_size;
  std::memcpy(&fb_size, src.data(), 4);
  std::unique_ptr<fb::ModelT> m(fb::GetSizePrefixedModel(src.data())->UnPack());
  const uint64_t data_start = (uint64_t(fb_size) + 4 + 63) / 64 * 64;
  flatbuffers::FlatBufferBuilder fbb;
  const auto name = fbb.CreateSharedString(std::string(name_bytes, 's'));
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (size_t i = 0; i < m->tensors.size() + copies; ++i) {
    const fb::TensorT& t = *m->tensors[i < m->tensors.size() ? i : 0];
    tensors.push_back(fb::CreateTensor(fbb, name, t.dtype, fbb.CreateVector(t.shape), t.offset, t.size));
  }
  std::vector<flatbuffers::Offset<fb::Value>> values;
  for (const auto& v : m->values) values.push_back(fb::Value::Pack(fbb, v.get()));
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  for (const auto& op : m->ops) ops.push_back(fb::Op::Pack(fbb, op.get()));
  const auto root = fb::CreateModel(fbb, m->format_version, fb::Metadata::Pack(fbb, m->metadata.get()), m->data_alignment,
                                    m->data_size, fbb.CreateVector(tensors), fbb.CreateVector(values),
                                    fbb.CreateVector(ops), fbb.CreateVector(m->inputs), fbb.CreateVector(m->outputs));
  fb::FinishSizePrefixedModelBuffer(fbb, root);
  std::string out(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  out.resize((out.size() + 63) / 64 * 64, '\0');
  out.append(src, data_start, std::string::npos);
  return out;
}

}  // namespace

TEST_CASE("loader: names shared by many entries cannot expand a small file", "[loader]") {
  // A few entries sharing a short name load (the names fit in the graph's bytes).
  CHECK(load_bytes(with_shared_names(2, 8), "shared_short").status == TERN_OK);
  // 6000 entries sharing one 1000-byte name: 6 MB of names from a graph of a few hundred KB.
  const std::string amplified = with_shared_names(6000, 1000);
  INFO("graph of " << amplified.size() << " bytes");
  expect_rejected(amplified, "shared_long", "add up to more bytes than the graph holds");
}

TEST_CASE("loader: the unmodified model loads and rebuilding keeps it valid", "[loader]") {
  CHECK(load_bytes(valid_model_bytes(), "valid").status == TERN_OK);
  CHECK(load_bytes(rebuild([](fb::ModelT&) {}), "rebuilt").status == TERN_OK);
}

TEST_CASE("loader: missing, empty and foreign files", "[loader]") {
  tern_model* model = nullptr;
  CHECK(tern_model_load("/nonexistent/model.tern", &model) == TERN_IO_ERROR);
  CHECK_THAT(std::string(tern_last_error()), Catch::Contains("/nonexistent/model.tern"));
  CHECK(tern_model_load(test::scratch_dir("loader_dir").c_str(), &model) == TERN_IO_ERROR);
  CHECK(model == nullptr);
  expect_rejected("", "empty", "empty");
  expect_rejected(std::string(100, 'x'), "garbage", "");
  std::string wrong_id = valid_model_bytes();
  std::memcpy(&wrong_id[8], "NOPE", 4);
  expect_rejected(wrong_id, "identifier", "identifier");
  std::string huge_prefix = valid_model_bytes();
  uint32_t big = 0xFFFFFFF0u;
  std::memcpy(&huge_prefix[0], &big, 4);
  expect_rejected(huge_prefix, "prefix", "truncated");
}

TEST_CASE("loader: every truncation is rejected", "[loader]") {
  const std::string& bytes = valid_model_bytes();
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 300; n += 7) lengths.push_back(n);
  for (int k = 1; k < 50; ++k) lengths.push_back(bytes.size() * size_t(k) / 50);
  lengths.push_back(bytes.size() - 1);
  for (size_t n : lengths) {
    LoadResult r = load_bytes(bytes.substr(0, n), "truncated");
    INFO("length " << n << ": " << r.message);
    CHECK(r.status != TERN_OK);
    CHECK(!r.message.empty());
  }
}

TEST_CASE("loader: random byte flips in the graph never crash", "[loader]") {
  const std::string& bytes = valid_model_bytes();
  uint32_t fb_size;
  std::memcpy(&fb_size, bytes.data(), 4);
  std::mt19937 rng(1234);
  int rejected = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    std::string corrupt = bytes;
    for (int f = 0; f < 3; ++f) corrupt[4 + rng() % fb_size] ^= char(1u << (rng() % 8));
    LoadResult r = load_bytes(corrupt, "flip");
    if (r.status != TERN_OK) {
      ++rejected;
      CHECK(!r.message.empty());
    }
  }
  // Most flips land in names or padding and are harmless; many others must be caught.
  INFO(rejected << " of " << trials << " corrupted files rejected");
  CHECK(rejected > 0);
}

TEST_CASE("loader: hostile graphs are rejected with a message naming the problem", "[loader]") {
  struct Case {
    const char* name;
    std::function<void(fb::ModelT&)> mutate;
    const char* words;
  };
  const Case cases[] = {
      {"offset past data", [](fb::ModelT& m) { m.tensors[0]->offset = m.data_size + 64; }, "outside the data segment"},
      {"offset overflow", [](fb::ModelT& m) { m.tensors[0]->offset = ~uint64_t(0) - 63; }, "outside the data segment"},
      {"unaligned offset", [](fb::ModelT& m) { m.tensors[1]->offset += 4; }, "aligned"},
      {"size mismatch", [](fb::ModelT& m) { m.tensors[0]->size -= 4; }, "does not match shape"},
      {"absurd dimension", [](fb::ModelT& m) { m.tensors[0]->shape[0] = int64_t(1) << 40; }, "out of range"},
      {"negative dimension", [](fb::ModelT& m) { m.tensors[0]->shape[0] = -5; }, "out of range"},
      {"overflowing shape",
       [](fb::ModelT& m) { m.tensors[0]->shape = {int64_t(1) << 31, int64_t(1) << 31, int64_t(1) << 31}; },
       "overflows"},
      {"rank too high", [](fb::ModelT& m) { m.tensors[0]->shape.assign(9, 1); }, "rank"},
      {"bad dtype", [](fb::ModelT& m) { m.tensors[0]->dtype = fb::DType(42); }, "dtype"},
      {"wrong weight shape", [](fb::ModelT& m) { m.tensors[0]->shape = {m.tensors[0]->shape[1], m.tensors[0]->shape[0]}; },
       "shape"},
      {"input out of range", [](fb::ModelT& m) { m.ops[3]->inputs[0] = 9999; }, "missing value"},
      {"read before write", [](fb::ModelT& m) { m.ops[1]->inputs[0] = m.ops[5]->outputs[0]; }, "before any op writes"},
      {"written twice", [](fb::ModelT& m) { m.ops[2]->outputs[0] = m.ops[1]->outputs[0]; }, "already written"},
      {"weight out of range", [](fb::ModelT& m) { m.ops[0]->weights[0] = 5000; }, "missing tensor"},
      {"unknown op code", [](fb::ModelT& m) { m.ops[2]->code = fb::OpCode(999); }, "unknown op code"},
      {"op version", [](fb::ModelT& m) { m.ops[2]->version = 7; }, "version"},
      {"params type", [](fb::ModelT& m) { m.ops[2]->params.Set(fb::AddParamsT()); }, "parameters"},
      {"value width zero", [](fb::ModelT& m) { m.values[2]->width = 0; }, "width"},
      {"value width mismatch", [](fb::ModelT& m) { m.values[3]->width += 1; }, "width"},
      {"format version", [](fb::ModelT& m) { m.format_version = 99; }, "format version"},
      {"alignment", [](fb::ModelT& m) { m.data_alignment = 48; }, "data_alignment"},
      {"data size", [](fb::ModelT& m) { m.data_size = uint64_t(1) << 50; }, "past the end"},
      {"no ops", [](fb::ModelT& m) { m.ops.clear(); }, "no ops"},
      {"two outputs", [](fb::ModelT& m) { m.outputs.push_back(0); }, "exactly one output"},
      {"input not ids", [](fb::ModelT& m) { m.inputs[0] = 3; }, "input"},
      {"output never written", [](fb::ModelT& m) { m.ops.pop_back(); }, "never written"},
      {"negative context", [](fb::ModelT& m) { m.metadata->max_context = -1; }, "max_context"},
      {"negative segment", [](fb::ModelT& m) { m.metadata->segment_length = -1; }, "segment_length -1"},
      {"segment past the context",
       [](fb::ModelT& m) {
         m.metadata->max_context = 64;
         m.metadata->segment_length = 65;
       },
       "segment_length 65 is outside [0, 64] (max_context)"},
      {"attention heads",
       [](fb::ModelT& m) {
         for (auto& op : m.ops)
           if (op->code == fb::OpCode::ATTENTION) op->params.AsAttentionParams()->heads += 1;
       },
       "width"},
      {"attention huge heads",
       [](fb::ModelT& m) {
         for (auto& op : m.ops)
           if (op->code == fb::OpCode::ATTENTION) op->params.AsAttentionParams()->heads = 1 << 30;
       },
       "heads"},
      {"tensor name too long", [](fb::ModelT& m) { m.tensors[0]->name.assign(1025, 'n'); }, "name of 1025 bytes is longer than the 1024"},
      {"op name too long", [](fb::ModelT& m) { m.ops[1]->name.assign(4096, 'n'); }, "op 1: name of 4096 bytes"},
      {"layer norm eps", [](fb::ModelT& m) {
         for (auto& op : m.ops)
           if (op->code == fb::OpCode::LAYER_NORM) op->params.AsLayerNormParams()->eps = -1.0f;
       },
       "eps"},
  };
  for (const Case& c : cases) expect_rejected(rebuild(c.mutate), c.name, c.words);
}

TEST_CASE("loader: compressed tensors with bad scales, groups or slots are rejected by name", "[loader]") {
  using convert::WeightFormat;
  // The first I8 matrix of the int8 model and the first op weight it is not (a norm's gain).
  auto first_i8 = [](const fb::ModelT& m) {
    for (size_t i = 0; i < m.tensors.size(); ++i)
      if (m.tensors[i]->dtype == fb::DType::I8) return i;
    FAIL("no I8 tensor");
    return size_t(0);
  };
  auto norm_op = [](fb::ModelT& m) -> fb::OpT& {
    for (auto& op : m.ops)
      if (op->code == fb::OpCode::LAYER_NORM) return *op;
    FAIL("no LAYER_NORM op");
    return *m.ops[0];
  };
  struct Case {
    const char* name;
    std::function<void(fb::ModelT&)> mutate;
    const char* words;
  };
  const Case cases[] = {
      {"scales missing", [&](fb::ModelT& m) { m.tensors[first_i8(m)]->scales = -1; }, "scale tensor -1 does not exist"},
      {"scales out of range", [&](fb::ModelT& m) { m.tensors[first_i8(m)]->scales = 100000; }, "does not exist"},
      {"scales itself",
       [&](fb::ModelT& m) {
         const size_t i = first_i8(m);
         m.tensors[i]->scales = int32_t(i);
       },
       "does not exist"},
      {"scales of the wrong dtype",  // an I4 tensor needs F16 scales
       [&](fb::ModelT& m) {
         fb::TensorT& t = *m.tensors[first_i8(m)];
         t.dtype = fb::DType::I4;
         t.size /= 2;
       },
       "must be F16, not F32"},
      {"group not a multiple of 32", [&](fb::ModelT& m) { m.tensors[first_i8(m)]->group_size = 48; }, "group size 48"},
      {"scales of the wrong shape", [&](fb::ModelT& m) { m.tensors[first_i8(m)]->group_size = 32; }, "its scales"},
      {"scales on a float32 tensor",
       [](fb::ModelT& m) {
         for (auto& t : m.tensors)
           if (t->dtype == fb::DType::F32) {
             t->scales = 0;
             return;
           }
       },
       "has no scales or group size"},
      {"compressed weight where the op reads float32",
       [&](fb::ModelT& m) { norm_op(m).weights[0] = int32_t(first_i8(m)); }, "read as F32 only"},
  };
  for (const Case& c : cases) expect_rejected(rebuild(c.mutate, WeightFormat::kInt8), c.name, c.words);
  // A NaN or infinite scale value, written into the data segment: the loader names the tensor and the group.
  for (WeightFormat f : {WeightFormat::kInt8, WeightFormat::kInt4}) {
    for (const bool nan : {true, false}) {
      std::string bytes = valid_model_bytes(f);
      uint32_t fb_size;
      std::memcpy(&fb_size, bytes.data(), 4);
      const uint64_t data_start = (uint64_t(fb_size) + 4 + 63) / 64 * 64;
      std::unique_ptr<fb::ModelT> m(fb::GetSizePrefixedModel(bytes.data())->UnPack());
      const fb::DType compressed = f == WeightFormat::kInt8 ? fb::DType::I8 : fb::DType::I4;
      size_t matrix = 0;
      while (m->tensors[matrix]->dtype != compressed) ++matrix;
      const fb::TensorT& scales = *m->tensors[size_t(m->tensors[matrix]->scales)];
      const uint64_t at = data_start + scales.offset + 3 * (f == WeightFormat::kInt8 ? 4 : 2);  // the fourth scale
      if (f == WeightFormat::kInt8) {
        const float bad = nan ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
        std::memcpy(&bytes[at], &bad, 4);
      } else {
        const uint16_t bad = nan ? 0x7E00 : 0x7C00;
        std::memcpy(&bytes[at], &bad, 2);
      }
      // The fourth scale: [3] of one per row, [r, g] of [rows, groups].
      const int64_t groups = scales.shape.size() == 2 ? scales.shape[1] : 0;
      const std::string index = groups ? std::to_string(3 / groups) + ", " + std::to_string(3 % groups) : "3";
      const std::string expected = "'" + m->tensors[matrix]->name + "': its scales '" + scales.name +
                                   "' hold a NaN or infinite value at [" + index + "]";
      expect_rejected(bytes, nan ? "nan scale" : "infinite scale", expected);
    }
  }
  // The unmodified compressed models load and run.
  for (WeightFormat f : {WeightFormat::kF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    const LoadResult r = load_bytes(valid_model_bytes(f), "compressed_valid");
    INFO(r.message);
    CHECK(r.status == TERN_OK);
  }
}
