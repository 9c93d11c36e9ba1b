// SPDX-License-Identifier: MIT
#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "format/dequantize.h"
#include "format/model.h"
#include "cpu/isa.h"
#ifdef TERN_HAVE_VULKAN
#include "convert.h"
#include "vulkan/context.h"
#endif

namespace tern::test {

std::string rebuild_model(const std::string& bytes, const std::function<void(fb::ModelT&)>& mutate) {
  uint32_t fb_size;
  std::memcpy(&fb_size, bytes.data(), 4);
  std::unique_ptr<fb::ModelT> model(fb::GetSizePrefixedModel(bytes.data())->UnPack());
  const uint64_t data_start = (uint64_t(fb_size) + 4 + 63) / 64 * 64;
  mutate(*model);
  flatbuffers::FlatBufferBuilder fbb;
  fb::FinishSizePrefixedModelBuffer(fbb, fb::Model::Pack(fbb, model.get()));
  std::string out(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
  out.resize((out.size() + 63) / 64 * 64, '\0');
  out.append(bytes, data_start, std::string::npos);
  return out;
}

std::string source_path(const std::string& relative) { return std::string(TERN_SOURCE_DIR) + "/" + relative; }

std::string scratch_dir(const std::string& name) {
  namespace fs = std::filesystem;
  // ctest runs test cases of one executable as concurrent processes: keep their files apart.
  fs::path dir = fs::path(TERN_BINARY_DIR) / "test-scratch" / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

bool cpu_kernels_as_asked(std::string* why) {
  const char* asked = std::getenv("TERN_CPU_ISA");
  if (asked == nullptr || *asked == '\0' || std::string(tern::cpu::isa().name) == asked) return true;
  *why = "TERN_CPU_ISA=" + std::string(asked) + " but the CPU " + tern::cpu::isa_description();
  return false;
}

double relative_error(const float* a, const float* ref, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(ref[i])) return std::numeric_limits<double>::infinity();
    double d = double(a[i]) - double(ref[i]);
    diff += d * d;
    norm += double(ref[i]) * double(ref[i]);
  }
  if (norm == 0) return std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

// A half has 11 significant bits down to 2^-14 and a fixed quantum of 2^-24 below; std::nearbyint rounds ties to
// even in the default rounding mode.
float round_to_half(float f) {
  if (std::isnan(f) || std::isinf(f) || f == 0.0f) return f;
  int e = 0;
  std::frexp(double(f), &e);  // |f| in [2^(e-1), 2^e)
  const double quantum = std::ldexp(1.0, std::max(e - 11, -24));
  const double r = std::nearbyint(double(f) / quantum) * quantum;
  if (std::fabs(r) > 65504.0) return f > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  return float(r);
}

std::vector<int32_t> random_ids(int64_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint32_t(rows));
  return ids;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (auto& x : out) x = dist(rng);
  return out;
}

namespace {
bool g_skipped = false;
}  // namespace

void note_skipped() { g_skipped = true; }
bool skipped_any() { return g_skipped; }

bool cpu_only_run() {
  const char* v = std::getenv("TERN_TESTS_CPU_ONLY");
  return v && *v && std::string(v) != "0";
}

bool vulkan_device(std::string* why) {
#ifdef TERN_HAVE_VULKAN
  static const std::string missing = [] {
    auto ctx = tern::vk::Context::create(0, true);
    return ctx.ok() ? std::string() : ctx.status().message();
  }();
  *why = missing;
  return missing.empty();
#else
  *why = "the Vulkan backend is not built";
  return false;
#endif
}

DispatchCounts dispatch_counts(const tern_session* s, int64_t n, int64_t position) {
  DispatchCounts d;
  size_t count = 0;
  REQUIRE(tern_session_count_dispatches(s, n, position, nullptr, 0, &count, &d.total) == TERN_OK);
  d.per_op.assign(count, 0);
  REQUIRE(tern_session_count_dispatches(s, n, position, d.per_op.data(), count, &count, &d.total) == TERN_OK);
  return d;
}

uint64_t vulkan_validation_messages() {
#ifdef TERN_HAVE_VULKAN
  return tern::vk::validation_message_count();
#else
  return 0;
#endif
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* backend_name(tern_backend backend) {
  switch (backend) {
    case TERN_BACKEND_CPU: return "CPU";
    case TERN_BACKEND_VULKAN: return "Vulkan";
    default: return "auto";
  }
}

double backend_tolerance(tern_backend backend, double cpu_tolerance) {
  return backend == TERN_BACKEND_VULKAN ? 1e-4 : cpu_tolerance;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

namespace {

uint64_t blob_checksum(uint64_t h, const uint8_t* p, size_t n) {
  constexpr uint64_t kPrime = 1099511628211ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kPrime;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * kPrime;
  return h;
}

}  // namespace

std::vector<uint8_t> saved_state(const tern_session* s) {
  size_t size = 0;
  REQUIRE(tern_session_save_state(s, nullptr, &size) == TERN_OK);
  std::vector<uint8_t> blob(size);
  REQUIRE(tern_session_save_state(s, blob.data(), &size) == TERN_OK);
  REQUIRE(size == blob.size());
  return blob;
}

void reseal_state(std::vector<uint8_t>* blob) {
  const uint64_t sum = blob_checksum(blob_checksum(1469598103934665603ull, blob->data(), 40), blob->data() + 48,
                                     blob->size() - 48);
  std::memcpy(blob->data() + 40, &sum, 8);
}

std::string convert_golden(const std::string& golden, const std::string& scratch) {
  const std::string out = scratch_dir(scratch) + "/model.tern";
  convert::ConvertOptions o;
  o.quiet = true;
  return convert::convert_checkpoint(source_path("tests/goldens/" + golden), out, o).ok() ? out : "";
}

EnvOverride::EnvOverride(const char* name, const std::string& value) : name_(name) {
  if (const char* v = std::getenv(name)) {
    had_ = true;
    old_ = v;
  }
  setenv(name, value.c_str(), 1);
}

EnvOverride::~EnvOverride() {
  if (had_) {
    setenv(name_, old_.c_str(), 1);
  } else {
    unsetenv(name_);
  }
}

void write_dequantised_twin(const std::string& f32_path, const std::string& compressed_path, const std::string& out,
                            int* replaced) {
  auto f32 = Model::load_file(f32_path);
  auto comp = Model::load_file(compressed_path);
  REQUIRE(f32.ok());
  REQUIRE(comp.ok());
  std::string bytes = read_file(f32_path);
  const uint8_t* base = f32.value()->graph_bytes();  // the mapping starts at the file's first byte
  *replaced = 0;
  std::vector<const TensorInfo*> scales;  // I4's float16 scale tensors: not weights of their own
  for (const TensorInfo& c : comp.value()->tensors())
    if (c.scales) scales.push_back(c.scales);
  for (const TensorInfo& c : comp.value()->tensors()) {
    if (!is_compressed(c.dtype) || std::count(scales.begin(), scales.end(), &c)) continue;
    const TensorInfo* t = nullptr;
    for (const TensorInfo& f : f32.value()->tensors())
      if (f.name == c.name) t = &f;
    INFO("tensor " << c.name);
    REQUIRE(t != nullptr);
    REQUIRE(t->shape == c.shape);
    REQUIRE(t->dtype == fb::DType::F32);
    std::vector<float> values(size_t(c.numel()));
    dequantize_rows(c, 0, c.numel() / c.shape.back(), values.data());
    std::memcpy(&bytes[size_t(t->data - base)], values.data(), values.size() * sizeof(float));
    ++*replaced;
  }
  write_file(out, bytes);
}

}  // namespace tern::test
