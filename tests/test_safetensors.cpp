// SPDX-License-Identifier: MIT
// safetensors reader and checkpoint directory: round trips and every kind of malformed file.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "safetensors.h"
#include "test_support.h"

using tern::convert::Checkpoint;
using tern::convert::SafetensorsFile;
using tern::convert::StDType;
using tern::convert::TensorView;

namespace {

// [u64 LE header length][header][data]
std::string st_bytes(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Parses in-memory bytes; the returned status is what the test inspects.
tern::Status parse(const std::string& bytes, const std::string& name = "model.safetensors") {
  auto file = SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
  return file.status();
}

// Fails the test unless `bytes` is rejected with a message containing each of `parts`.
void expect_rejected(const std::string& bytes, const std::vector<std::string>& parts) {
  tern::Status st = parse(bytes);
  INFO("message: " << st.message());
  REQUIRE_FALSE(st.ok());
  for (const auto& p : parts) CHECK_THAT(st.message(), Catch::Contains(p));
}

// Half-precision value from its bits, written independently of the reader's conversion.
float half_value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) return float(sign * std::ldexp(double(mant), -24));
  if (exp == 31) return mant ? NAN : float(sign) * INFINITY;
  return float(sign * std::ldexp(1.0 + mant / 1024.0, exp - 15));
}

}  // namespace

TEST_CASE("safetensors: F32, F16 and BF16 tensors round trip", "[safetensors]") {
  const std::vector<float> f32 = tern::test::random_floats(24, 1);  // "a.f32" [2, 3, 4]
  std::mt19937 rng(2);
  std::vector<uint16_t> f16(15), bf16(6);  // "b.f16" [15], "c.bf16" [3, 2]
  for (auto& h : f16) h = uint16_t(rng() & 0xffff & ~0x7c00u) | uint16_t((rng() % 31) << 10);  // finite halves
  f16[0] = 0x3c00;                                                                      // 1.0
  f16[1] = 0x0001;                                                                      // smallest subnormal
  for (auto& b : bf16) {
    float f = tern::test::random_floats(1, rng())[0] * 1000.0f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    b = uint16_t(bits >> 16);
  }
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("c.bf16":{"dtype":"BF16","shape":[3,2],"data_offsets":[126,138]},)"
                             R"("a.f32":{"dtype":"F32","shape":[2,3,4],"data_offsets":[0,96]},)"
                             R"("b.f16":{"dtype":"F16","shape":[15],"data_offsets":[96,126]}})";
  const std::string dir = tern::test::scratch_dir("safetensors_roundtrip");
  tern::test::write_file(dir + "/model.safetensors", st_bytes(header, raw(f32) + raw(f16) + raw(bf16)));

  auto file = SafetensorsFile::open(dir + "/model.safetensors");
  REQUIRE(file.ok());
  const auto& tensors = file.value()->tensors();
  REQUIRE(tensors.size() == 3);
  CHECK(file.value()->metadata().at("format") == "pt");
  CHECK(tensors[0].name == "a.f32");  // sorted by name
  CHECK(tensors[0].shape == std::vector<int64_t>{2, 3, 4});
  CHECK(tensors[2].dtype == StDType::BF16);

  std::vector<float> out(24);
  REQUIRE(tern::convert::to_f32(tensors[0], out.data()).ok());
  CHECK(out == f32);
  REQUIRE(tern::convert::to_f32(tensors[1], out.data()).ok());
  for (size_t i = 0; i < f16.size(); ++i) CHECK(out[i] == half_value(f16[i]));
  CHECK(out[0] == 1.0f);
  REQUIRE(tern::convert::to_f32(tensors[2], out.data()).ok());
  for (size_t i = 0; i < bf16.size(); ++i) {
    uint32_t bits = uint32_t(bf16[i]) << 16;
    float expect;
    std::memcpy(&expect, &bits, 4);
    CHECK(out[i] == expect);
  }
}

TEST_CASE("safetensors: empty tensors and integer dtypes are accepted", "[safetensors]") {
  const std::vector<int32_t> ids = {7, -3};
  const std::string bytes = st_bytes(R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[4,4]},)"
                                     R"("i":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                                     raw(ids));
  auto file = SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.safetensors");
  REQUIRE(file.ok());
  const TensorView& i = file.value()->tensors()[1];
  CHECK(i.size == 8);
  std::vector<float> out(2);
  tern::Status st = tern::convert::to_f32(i, out.data());
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("'i'") && Catch::Contains("I32"));
}

TEST_CASE("safetensors: malformed files are rejected with the offending field named", "[safetensors]") {
  const std::string data(64, '\x01');
  SECTION("truncated file") { expect_rejected(std::string(5, '\0'), {"model.safetensors", "too short"}); }
  SECTION("header length past the end") {
    std::string bytes = st_bytes("{}");
    bytes[0] = char(200);
    expect_rejected(bytes, {"header length 200", "past the end"});
  }
  SECTION("bad JSON") { expect_rejected(st_bytes(R"({"a": {"dtype": )"), {"not valid JSON"}); }
  SECTION("header is not an object") { expect_rejected(st_bytes("[1, 2]"), {"must be a JSON object"}); }
  SECTION("entry is not an object") { expect_rejected(st_bytes(R"({"w": 3})"), {"'w'", "must be an object"}); }
  SECTION("unknown dtype") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", data),
                    {"tensor 'w'", "unknown dtype \"F8\""});
  }
  SECTION("missing dtype") {
    expect_rejected(st_bytes(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", data), {"tensor 'w'", "'dtype'"});
  }
  SECTION("negative dimension") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", data),
                    {"tensor 'w'", "non-negative"});
  }
  SECTION("fractional dimension") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", data), {"tensor 'w'"});
  }
  SECTION("shape whose size overflows") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data),
                    {"tensor 'w'", "too large"});
  }
  SECTION("dimension beyond 64 bits") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"F32","shape":[1e30],"data_offsets":[0,8]}})", data), {"tensor 'w'"});
  }
  SECTION("offsets past the end of the data") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"F32","shape":[32],"data_offsets":[0,128]}})", data),
                    {"tensor 'w'", "data_offsets [0, 128]", "past the end"});
  }
  SECTION("offsets reversed") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,4]}})", data), {"tensor 'w'"});
  }
  SECTION("offsets malformed") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0]}})", data),
                    {"tensor 'w'", "data_offsets"});
  }
  SECTION("size does not match the shape") {
    expect_rejected(st_bytes(R"({"embed.weight":{"dtype":"F32","shape":[4,8],"data_offsets":[0,100]}})",
                             std::string(128, 'x')),
                    {"model.safetensors: tensor 'embed.weight': data_offsets [0, 100] hold 100 bytes but shape [4, 8] "
                     "of F32 needs 128"});
  }
  SECTION("overlapping tensors") {
    expect_rejected(st_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                             data),
                    {"tensor 'b'", "overlap tensor 'a'"});
  }
  SECTION("a tensor inside another") {
    expect_rejected(st_bytes(R"({"big":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                             R"("mid":{"dtype":"F32","shape":[1],"data_offsets":[28,32]},)"
                             R"("small":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             data),
                    {"overlap tensor 'big'"});
  }
  SECTION("the same name twice in one header") {
    expect_rejected(st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                             data),
                    {"tensor 'w' appears twice"});
  }
  SECTION("metadata that is not an object of strings") {
    expect_rejected(st_bytes(R"({"__metadata__":{"step":3}})"), {"__metadata__", "'step'"});
    expect_rejected(st_bytes(R"({"__metadata__":[1]})"), {"__metadata__"});
  }
}

TEST_CASE("safetensors: a header over 100 MiB is refused before it is parsed", "[safetensors]") {
  const std::string path = tern::test::scratch_dir("safetensors_huge_header") + "/big.safetensors";
  const uint64_t n = (100ull << 20) + 1;
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[size_t(i)] = char((n >> (8 * i)) & 0xff);
  tern::test::write_file(path, prefix);
  REQUIRE(::truncate(path.c_str(), off_t(8 + n)) == 0);  // sparse: costs no disk
  auto file = SafetensorsFile::open(path);
  REQUIRE_FALSE(file.ok());
  CHECK_THAT(file.status().message(), Catch::Contains("big.safetensors") && Catch::Contains("100 MiB"));
}

TEST_CASE("safetensors: unreadable paths give I/O errors", "[safetensors]") {
  auto file = SafetensorsFile::open("/nonexistent/model.safetensors");
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == TERN_IO_ERROR);
  CHECK_THAT(file.status().message(), Catch::Contains("/nonexistent/model.safetensors"));
}

TEST_CASE("checkpoint: tensors from several files, sorted, each name once", "[safetensors]") {
  const std::string dir = tern::test::scratch_dir("checkpoint_two_files");
  const std::vector<float> a = tern::test::random_floats(4, 3), b = tern::test::random_floats(2, 4);
  tern::test::write_file(dir + "/config.json", R"({"model_type": "x"})");
  tern::test::write_file(dir + "/model-00001.safetensors",
                         st_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", raw(a)));
  tern::test::write_file(dir + "/model-00002.safetensors",
                         st_bytes(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", raw(b)));
  tern::test::write_file(dir + "/notes.txt", "not a tensor file");

  auto ckpt = Checkpoint::open(dir);
  REQUIRE(ckpt.ok());
  const Checkpoint& c = *ckpt.value();
  CHECK(c.config()["model_type"] == "x");
  CHECK(c.files() == std::vector<std::string>{"model-00001.safetensors", "model-00002.safetensors"});
  CHECK(c.tensor_count() == 2);
  CHECK(c.find("missing") == nullptr);
  const TensorView* vb = c.find("b");
  REQUIRE(vb != nullptr);
  CHECK(vb->file == "model-00002.safetensors");
  std::vector<float> out(2);
  REQUIRE(tern::convert::to_f32(*vb, out.data()).ok());
  CHECK(out == b);
  CHECK(c.unused() == std::vector<std::string>{"a"});
  CHECK(tern::convert::describe_unused(c.unused()) == "1 checkpoint tensor was not used: a");
  CHECK(tern::convert::describe_unused({"a", "b", "c", "d", "e", "f", "g"}) ==
        "7 checkpoint tensors were not used: a, b, c, d, e and 2 more");
}

TEST_CASE("checkpoint: a tensor name in two files is an error", "[safetensors]") {
  const std::string dir = tern::test::scratch_dir("checkpoint_duplicate");
  const std::string one = st_bytes(R"({"shared.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  tern::test::write_file(dir + "/config.json", "{}");
  tern::test::write_file(dir + "/a.safetensors", one);
  tern::test::write_file(dir + "/b.safetensors", one);
  auto ckpt = Checkpoint::open(dir);
  REQUIRE_FALSE(ckpt.ok());
  CHECK_THAT(ckpt.status().message(), Catch::Contains("'shared.weight'") && Catch::Contains("a.safetensors") &&
                                          Catch::Contains("b.safetensors"));
}

TEST_CASE("checkpoint: directory problems are reported", "[safetensors]") {
  const std::string dir = tern::test::scratch_dir("checkpoint_problems");
  auto missing_dir = Checkpoint::open(dir + "/nope");
  CHECK_FALSE(missing_dir.ok());

  auto no_config = Checkpoint::open(dir);
  REQUIRE_FALSE(no_config.ok());
  CHECK_THAT(no_config.status().message(), Catch::Contains("config.json"));

  tern::test::write_file(dir + "/config.json", "{ not json");
  auto bad_config = Checkpoint::open(dir);
  REQUIRE_FALSE(bad_config.ok());
  CHECK_THAT(bad_config.status().message(), Catch::Contains("config.json: not valid JSON"));

  tern::test::write_file(dir + "/config.json", "{}");
  auto no_tensors = Checkpoint::open(dir);
  REQUIRE_FALSE(no_tensors.ok());
  CHECK_THAT(no_tensors.status().message(), Catch::Contains("no .safetensors files"));

  tern::test::write_file(dir + "/model.safetensors", "short");
  auto bad_file = Checkpoint::open(dir);
  REQUIRE_FALSE(bad_file.ok());
  CHECK_THAT(bad_file.status().message(), Catch::Contains("model.safetensors"));
}
