// SPDX-License-Identifier: MIT
// tern-convert against hostile inputs (issue 20, round two), through the built binary under a 20 s timeout and a
// 4 GiB address-space limit, as they were found: nesting deep enough to overflow a recursive parser, inputs that
// block or never end, header sizes that exposed a quadratic step, signals and file-size limits mid-write, inputs
// truncated while being read, models the loader rejects, outputs that are devices or inputs, non-finite weights,
// output names at NAME_MAX.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert.h"
#include "run_tool.h"
#include "safetensors.h"
#include "sentencepiece_corpus.h"
#include "tern/tern.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kConvert = std::string(TERN_BINARY_DIR) + "/converter/tern-convert";
constexpr int kTimeoutSeconds = tern::test::kToolTimeoutSeconds;
using Run = tern::test::ToolRun;
using Limits = tern::test::ToolLimits;
using tern::test::has_exited;

// Starts tern-convert with `args`, stderr to `err_path`, under the address-space limit.
pid_t spawn(const std::vector<std::string>& args, const std::string& err_path, const Limits& limits = {}) {
  REQUIRE(fs::exists(kConvert));  // built with the tests: cmake --build B --target tern-convert
  const pid_t pid = tern::test::spawn_tool(kConvert, args, "", err_path, limits);
  REQUIRE(pid >= 0);
  return pid;
}

Run wait_for(pid_t pid, const std::string& err_path) { return tern::test::wait_for_tool(pid, "", err_path); }

Run convert(const std::vector<std::string>& args, const std::string& scratch, const Limits& limits = {}) {
  const std::string err = scratch + "/stderr.txt";
  return wait_for(spawn(args, err, limits), err);
}

// The run failed cleanly: exit status 1, one message containing `expected`, within the time limit.
void expect_error(const Run& r, const std::string& expected) {
  INFO("stderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(expected));
}

size_t count_temporaries(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) ++n;
  return n;
}

// [u64 header length][header][data]
std::string safetensors_file(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string nested(size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// A tiny tern-reference model (converter/reference-family.md): V 16, d 8, 2 heads, F 16, one layer, untied head.
struct Tiny {
  json config = {{"model_type", "tern-reference"}, {"vocab_size", 16},     {"hidden_size", 8},
                 {"num_layers", 1},                {"num_heads", 2},       {"intermediate_size", 16},
                 {"max_position_embeddings", 16},  {"tie_word_embeddings", false}};
  std::map<std::string, std::vector<int64_t>> shapes() const {
    const int64_t V = config["vocab_size"], d = config["hidden_size"], F = config["intermediate_size"],
                  P = config["max_position_embeddings"];
    std::map<std::string, std::vector<int64_t>> p;
    p["embed.weight"] = {V, d};
    p["pos_embed.weight"] = {P, d};
    for (const char* n : {"attn_norm", "mlp_norm"}) p[std::string("layers.0.") + n + ".weight"] = p[std::string("layers.0.") + n + ".bias"] = {d};
    for (const char* n : {"q", "k", "v", "out"}) {
      p[std::string("layers.0.attn.") + n + ".weight"] = {d, d};
      p[std::string("layers.0.attn.") + n + ".bias"] = {d};
    }
    p["layers.0.mlp.fc1.weight"] = {F, d};
    p["layers.0.mlp.fc1.bias"] = {F};
    p["layers.0.mlp.fc2.weight"] = {d, F};
    p["layers.0.mlp.fc2.bias"] = {d};
    p["final_norm.weight"] = p["final_norm.bias"] = {d};
    p["lm_head.weight"] = {V, d};
    return p;
  }
};

// Writes `dir`/config.json and `dir`/model.safetensors: every tensor F32 random, except those in `raw`, whose
// header entry and bytes are given (dtype, shape, bytes). `sparse` leaves the data as a hole of zeros (big models).
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
void write_tiny(const std::string& dir, const Tiny& t, const std::map<std::string, RawTensor>& raw = {}) {
  fs::create_directories(dir);
  tern::test::write_file(dir + "/config.json", t.config.dump());
  json header = json::object();
  std::string data;
  uint32_t seed = 3;
  for (const auto& [name, shape] : t.shapes()) {
    std::string bytes, dtype = "F32";
    std::vector<int64_t> sh = shape;
    if (auto it = raw.find(name); it != raw.end()) {
      bytes = it->second.bytes, dtype = it->second.dtype, sh = it->second.shape;
    } else {
      size_t n = 1;
      for (int64_t d : shape) n *= size_t(d);
      const std::vector<float> v = tern::test::random_floats(n, seed++);
      bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    }
    header[name] = {{"dtype", dtype}, {"shape", sh}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  tern::test::write_file(dir + "/model.safetensors", safetensors_file(header.dump(), data));
}

// The same model at a size that takes a while to write (untied embedding and head of V x 64 floats each, 2 x 64
// MiB), its data a sparse hole of zeros so that making it costs nothing.
void write_big(const std::string& dir) {
  Tiny t;
  t.config["vocab_size"] = 262144;
  t.config["hidden_size"] = 64;
  t.config["intermediate_size"] = 64;
  fs::create_directories(dir);
  tern::test::write_file(dir + "/config.json", t.config.dump());
  json header = json::object();
  uint64_t at = 0;
  for (const auto& [name, shape] : t.shapes()) {
    uint64_t bytes = 4;
    for (int64_t d : shape) bytes *= uint64_t(d);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  const std::string head = safetensors_file(header.dump());
  tern::test::write_file(dir + "/model.safetensors", head);
  fs::resize_file(dir + "/model.safetensors", head.size() + at);
}

std::string f32_bytes(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

}  // namespace

TEST_CASE("convert hostile: nesting 100,000 levels deep is an error, never a stack overflow", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_nesting");
  const std::string deep = nested(100000);  // 200 KB of [[[[...]]]]
  const std::string out = dir + "/out.tern";
  Tiny tiny;

  SECTION("as the whole safetensors header") {
    write_tiny(dir + "/c", tiny);
    tern::test::write_file(dir + "/c/model.safetensors", safetensors_file(deep));
    expect_error(convert({dir + "/c", "-o", out}, dir), "model.safetensors: header is nested deeper than 64 levels");
  }
  SECTION("in __metadata__") {
    write_tiny(dir + "/c", tiny);
    tern::test::write_file(dir + "/c/model.safetensors", safetensors_file(R"({"__metadata__": )" + deep + "}"));
    expect_error(convert({dir + "/c", "-o", out}, dir), "header is nested deeper than 64 levels");
  }
  SECTION("in a tensor entry, unclosed") {
    write_tiny(dir + "/c", tiny);
    tern::test::write_file(dir + "/c/model.safetensors",
                           safetensors_file(R"({"w": {"dtype": "F32", "shape": )" + std::string(100000, '[')));
    expect_error(convert({dir + "/c", "-o", out}, dir), "header is nested deeper than 64 levels");
  }
  SECTION("in config.json fields") {
    write_tiny(dir + "/c", tiny);
    for (const char* field : {"hidden_size", "attention", "model_type"}) {
      json c = tiny.config;
      c.erase(field);
      std::string text = c.dump();
      text.insert(1, "\"" + std::string(field) + "\": " + deep + ", ");
      tern::test::write_file(dir + "/c/config.json", text);
      INFO(field);
      expect_error(convert({dir + "/c", "-o", out}, dir), "config.json: nested deeper than 64 levels");
    }
  }
  SECTION("64 levels parse; the value's message is short") {
    write_tiny(dir + "/c", tiny);
    json c = tiny.config;
    c.erase("hidden_size");
    std::string text = c.dump();
    text.insert(1, "\"hidden_size\": " + nested(63, "1") + ", ");  // 64 with the top-level object
    tern::test::write_file(dir + "/c/config.json", text);
    const Run r = convert({dir + "/c", "-o", out}, dir);
    expect_error(r, "config.json: field 'hidden_size' must be a positive integer (at most 2147483647), got [[[[");
    CHECK_THAT(r.err, Catch::Contains("..."));
    CHECK(r.err.size() < 200);
  }
  CHECK_FALSE(fs::exists(out));

  // The library entry point and the fuzz target's parser say the same.
  const std::string image = safetensors_file(R"({"a": )" + deep + "}");
  auto parsed = tern::convert::SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "x.safetensors");
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().message() == "x.safetensors: header is nested deeper than 64 levels of arrays and objects");
}

TEST_CASE("convert hostile: a message quotes at most a short part of the input", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_long_messages");
  const std::string huge(1 << 20, 'n');  // 1 MiB
  Tiny tiny;
  write_tiny(dir + "/c", tiny);
  auto check_short = [&](const Run& r, const std::string& expected) {
    expect_error(r, expected);
    CHECK(r.err.size() < 400);
  };
  // A tensor name, a dtype, a metadata key and value, a shape.
  tern::test::write_file(dir + "/c/model.safetensors",
                         safetensors_file(R"({")" + huge + R"(": {"dtype": "F32", "shape": [1], "data_offsets": [0, 8]}})", std::string(8, '\0')));
  check_short(convert({dir + "/c", "-o", dir + "/o.tern"}, dir), "tensor 'nnnnnnnn");
  tern::test::write_file(dir + "/c/model.safetensors",
                         safetensors_file(R"({"w": {"dtype": ")" + huge + R"(", "shape": [1], "data_offsets": [0, 4]}})", std::string(4, '\0')));
  check_short(convert({dir + "/c", "-o", dir + "/o.tern"}, dir), "unknown dtype \"nnnn");
  tern::test::write_file(dir + "/c/model.safetensors", safetensors_file(R"({"__metadata__": {")" + huge + R"(": 3}})"));
  check_short(convert({dir + "/c", "-o", dir + "/o.tern"}, dir), "__metadata__ entry 'nnnn");
  std::string dims = "[1";
  for (int i = 0; i < 100000; ++i) dims += ",1";
  tern::test::write_file(dir + "/c/model.safetensors",
                         safetensors_file(R"({"w": {"dtype": "F32", "shape": )" + dims + R"(], "data_offsets": [0, 4]}})", std::string(4, '\0')));
  check_short(convert({dir + "/c", "-o", dir + "/o.tern"}, dir), "tensor 'w': shape has 100001 dimensions, more than 64");
  // config.json: a string value, a model_type.
  write_tiny(dir + "/c", tiny);
  json c = tiny.config;
  c["activation"] = huge;
  tern::test::write_file(dir + "/c/config.json", c.dump());
  check_short(convert({dir + "/c", "-o", dir + "/o.tern"}, dir), "field 'activation' must be one of");
  c = tiny.config;
  c["model_type"] = huge;
  tern::test::write_file(dir + "/c/config.json", c.dump());
  check_short(convert({dir + "/c", "-o", dir + "/o.tern"}, dir), "unknown model_type 'nnnn");
  // Unused tensors with long names: the warning is short too.
  tern::test::write_file(dir + "/c/config.json", tiny.config.dump());
  {
    json header = json::object();
    std::string data;
    uint32_t seed = 1;
    for (const auto& [name, shape] : tiny.shapes()) {
      size_t n = 1;
      for (int64_t d : shape) n *= size_t(d);
      const std::string b = f32_bytes(tern::test::random_floats(n, seed++));
      header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + b.size()}}};
      data += b;
    }
    for (int i = 0; i < 6; ++i) header[huge + std::to_string(i)] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}};
    tern::test::write_file(dir + "/c/model.safetensors", safetensors_file(header.dump(), data));
    const Run r = convert({dir + "/c", "-o", dir + "/o.tern"}, dir);
    INFO(r.err.substr(0, 300));
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("6 checkpoint tensors were not used: nnnn"));
    CHECK(r.err.size() < 2000);
  }
}

TEST_CASE("convert hostile: FIFOs, devices and endless inputs are refused without blocking", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_fifo");
  const std::string c = dir + "/c";
  const std::string out = dir + "/out.tern";
  Tiny tiny;
  SECTION("config.json a FIFO with no writer") {
    write_tiny(c, tiny);
    fs::remove(c + "/config.json");
    REQUIRE(mkfifo((c + "/config.json").c_str(), 0644) == 0);
    expect_error(convert({c, "-o", out}, dir), "'" + c + "/config.json' is a FIFO, not a regular file");
  }
  SECTION("config.json is /dev/zero") {
    write_tiny(c, tiny);
    fs::remove(c + "/config.json");
    fs::create_symlink("/dev/zero", c + "/config.json");
    expect_error(convert({c, "-o", out}, dir), "'" + c + "/config.json' is a character device, not a regular file");
  }
  SECTION("config.json over 16 MiB") {
    write_tiny(c, tiny);
    tern::test::write_file(c + "/config.json", tiny.config.dump() + std::string((16 << 20) + 1, ' '));
    expect_error(convert({c, "-o", out}, dir), "'" + c + "/config.json' holds more than 16 MiB, too large for a config");
  }
  SECTION("a safetensors file a FIFO, next to a good one") {
    write_tiny(c, tiny);
    REQUIRE(mkfifo((c + "/more.safetensors").c_str(), 0644) == 0);
    expect_error(convert({c, "-o", out}, dir), "'" + c + "/more.safetensors' is a FIFO, not a regular file");
  }
  SECTION("a safetensors name on a directory") {
    write_tiny(c, tiny);
    fs::create_directories(c + "/shard.safetensors");
    expect_error(convert({c, "-o", out}, dir), "'" + c + "/shard.safetensors' is a directory, not a regular file");
  }
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("convert hostile: a header of 100,000 tensors converts within the time limit", "[converter][hostile]") {
  // It used to take O(n^2) (nlohmann's callback parser rescans the parent object at every member's end): 50k
  // tensors took 25 s, 100k several minutes. Timing: converter/bench/many_tensors.py.
  const std::string dir = tern::test::scratch_dir("hostile_many");
  Tiny tiny;
  json header = json::object();
  std::string data;
  uint32_t seed = 1;
  for (const auto& [name, shape] : tiny.shapes()) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    const std::string b = f32_bytes(tern::test::random_floats(n, seed++));
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + b.size()}}};
    data += b;
  }
  const size_t base = data.size();
  constexpr int kExtra = 100000;
  for (int i = 0; i < kExtra; ++i) {
    const size_t at = base + 4 * size_t(kExtra - 1 - i);
    header["extra." + std::to_string(i)] = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {at, at + 4}}};
  }
  data += std::string(4 * size_t(kExtra), '\0');
  fs::create_directories(dir + "/c");
  tern::test::write_file(dir + "/c/config.json", tiny.config.dump());
  tern::test::write_file(dir + "/c/model.safetensors", safetensors_file(header.dump(), data));
  const Run r = convert({dir + "/c", "-o", dir + "/out.tern"}, dir);
  INFO(r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("100000 checkpoint tensors were not used"));
}

TEST_CASE("convert hostile: SIGINT or SIGTERM mid-write removes the temporary and keeps the old output", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_signals");
  write_big(dir + "/c");
  const std::string out_dir = dir + "/out";
  fs::create_directories(out_dir);
  const std::string out = out_dir + "/model.tern";
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    tern::test::write_file(out, "previous model");
    bool caught = false;
    for (int attempt = 0; attempt < 5 && !caught; ++attempt) {
      const std::string err = dir + "/stderr.txt";
      const pid_t pid = spawn({dir + "/c", "-o", out, "-q"}, err);
      // Wait for the temporary, then freeze the converter and make sure it is still there.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutSeconds);
      while (count_temporaries(out_dir) == 0 && std::chrono::steady_clock::now() < deadline &&
             !has_exited(pid)) {
        std::this_thread::yield();
      }
      kill(pid, SIGSTOP);
      const bool mid_write = count_temporaries(out_dir) == 1;
      kill(pid, sig);
      kill(pid, SIGCONT);
      const Run r = wait_for(pid, err);
      if (!mid_write) continue;  // it finished (or had not started) before it was stopped: try again
      caught = true;
      INFO("stderr: " << r.err);
      CHECK_FALSE(r.timed_out);
      CHECK(r.signal == sig);  // it dies of the signal, as without the handler
      CHECK(count_temporaries(out_dir) == 0);
      CHECK(tern::test::read_file(out) == "previous model");
    }
    CHECK(caught);
  }
}

TEST_CASE("convert hostile: ulimit -f fails with EFBIG, reported, nothing left behind", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_fsize");
  write_big(dir + "/c");
  fs::create_directories(dir + "/out");
  const std::string out = dir + "/out/model.tern";
  tern::test::write_file(out, "previous model");
  Limits limits;
  limits.file_size = 1 << 20;
  const Run r = convert({dir + "/c", "-o", out, "-q"}, dir, limits);
  expect_error(r, "'" + out + "': write failed after ");
  CHECK_THAT(r.err, Catch::Contains("File too large"));
  CHECK(count_temporaries(dir + "/out") == 0);
  CHECK(tern::test::read_file(out) == "previous model");
}

TEST_CASE("convert hostile: an input truncated while being read is an I/O error, not SIGBUS", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_truncated");
  write_big(dir + "/c");
  const std::string st = dir + "/c/model.safetensors";
  const std::string head_only = [&] {
    const std::string all = tern::test::read_file(st).substr(0, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(all[size_t(i)]);
    return std::to_string(8 + n);
  }();
  fs::create_directories(dir + "/out");
  const std::string out = dir + "/out/model.tern";
  bool caught = false;
  for (int attempt = 0; attempt < 5 && !caught; ++attempt) {
    write_big(dir + "/c");
    const std::string err = dir + "/stderr.txt";
    const pid_t pid = spawn({dir + "/c", "-o", out, "-q"}, err);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutSeconds);
    while (count_temporaries(dir + "/out") == 0 && std::chrono::steady_clock::now() < deadline &&
           !has_exited(pid)) {
      std::this_thread::yield();
    }
    kill(pid, SIGSTOP);
    const bool mid_write = count_temporaries(dir + "/out") == 1;
    fs::resize_file(st, std::stoull(head_only));  // only the header is left
    kill(pid, SIGCONT);
    const Run r = wait_for(pid, err);
    if (!mid_write) continue;
    caught = true;
    expect_error(r, "was it truncated while being converted?");
    CHECK_THAT(r.err, Catch::Contains("'" + st + "': the file ends at byte "));
    CHECK(count_temporaries(dir + "/out") == 0);
    CHECK_FALSE(fs::exists(out));
  }
  CHECK(caught);
}

TEST_CASE("convert hostile: a model the loader rejects is not written", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_loader");
  fs::create_directories(dir + "/out");
  const std::string out = dir + "/out/model.tern";
  tern::test::write_file(out, "previous model");
  SECTION("chunked attention: chunk = chunks_before = 2^31 - 1") {
    Tiny tiny;
    tiny.config["attention"] = {{"kind", "chunked"}, {"chunk", 2147483647}, {"chunks_before", 2147483647}, {"chunks_after", 0}};
    write_tiny(dir + "/c", tiny);
    expect_error(convert({dir + "/c", "-o", out}, dir),
                 "'" + out + "': the converted model fails the loader's checks (op 4 (ATTENTION 'layers.0.attn'): chunk window too large); nothing was written");
  }
  SECTION("Transformer-XL: mem_len 2^25") {
    fs::copy(tern::test::source_path("tests/goldens/transfo_xl_plain"), dir + "/c");
    json c = json::parse(tern::test::read_file(dir + "/c/config.json"));
    c["mem_len"] = 1 << 25;
    tern::test::write_file(dir + "/c/config.json", c.dump());
    expect_error(convert({dir + "/c", "-o", out}, dir), "mem_len 33554432 must be in [0, 2^24]");
    tern::Status st = tern::convert::convert_checkpoint(dir + "/c", out, {true});
    CHECK(st.code() == TERN_INVALID_MODEL);
    CHECK_THAT(st.message(), Catch::Contains("fails the loader's checks"));
  }
  CHECK(tern::test::read_file(out) == "previous model");
  CHECK(count_temporaries(dir + "/out") == 0);
}

TEST_CASE("convert hostile: -o refuses devices, FIFOs, directories and the checkpoint's own files", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_output");
  const std::string c = dir + "/c";
  write_tiny(c, Tiny{});
  const std::string model = tern::test::read_file(c + "/model.safetensors");
  const std::string config = tern::test::read_file(c + "/config.json");

  // A character device: a node of our own (a twin of /dev/null), never the system's, which a converter that got
  // this wrong would replace for every process on the machine. Creating one needs root; elsewhere the FIFO below
  // takes the same path.
  const std::string chardev = dir + "/null";
  if (mknod(chardev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    expect_error(convert({c, "-o", chardev}, dir), "'" + chardev + "' is a character device, not a regular file; refusing to replace it");
    struct stat st {};
    REQUIRE(stat(chardev.c_str(), &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
  } else {
    WARN("not checked: a character device as -o (mknod needs root)");
  }

  REQUIRE(mkfifo((dir + "/fifo").c_str(), 0644) == 0);
  expect_error(convert({c, "-o", dir + "/fifo"}, dir), "'" + dir + "/fifo' is a FIFO, not a regular file");
  expect_error(convert({c, "-o", c}, dir), "'" + c + "' is a directory, not a regular file");

  expect_error(convert({c, "-o", c + "/model.safetensors"}, dir),
               "'" + c + "/model.safetensors' is the checkpoint's own '" + c + "/model.safetensors'; refusing to overwrite an input");
  expect_error(convert({c, "-o", c + "/config.json"}, dir), "is the checkpoint's own '" + c + "/config.json'");
  // The same file under another name: a hard link, a symbolic link, a path with "..".
  fs::create_hard_link(c + "/model.safetensors", dir + "/hard.tern");
  expect_error(convert({c, "-o", dir + "/hard.tern"}, dir), "'" + dir + "/hard.tern' is the checkpoint's own");
  fs::create_symlink(c + "/config.json", dir + "/soft.tern");
  expect_error(convert({c, "-o", dir + "/soft.tern"}, dir), "'" + dir + "/soft.tern' is the checkpoint's own");
  expect_error(convert({c, "-o", c + "/../c/model.safetensors"}, dir), "is the checkpoint's own");

  CHECK(tern::test::read_file(c + "/model.safetensors") == model);
  CHECK(tern::test::read_file(c + "/config.json") == config);
  CHECK(count_temporaries(dir) == 0);
  CHECK(count_temporaries(c) == 0);
}

TEST_CASE("convert hostile: NaN and infinite weights are refused unless --allow-non-finite", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_nonfinite");
  const std::string out = dir + "/out.tern";
  Tiny tiny;
  std::vector<float> q = tern::test::random_floats(64, 9);
  q[13] = std::numeric_limits<float>::quiet_NaN();
  write_tiny(dir + "/c", tiny, {{"layers.0.attn.q.weight", {"F32", {8, 8}, f32_bytes(q)}}});
  expect_error(convert({dir + "/c", "-o", out}, dir),
               "model.safetensors: tensor 'layers.0.attn.q.weight': element 13 (index [1, 5] of shape [8, 8]) is NaN; "
               "non-finite weights are refused (tern-convert --allow-non-finite converts them)");
  CHECK_FALSE(fs::exists(out));
  const Run ok = convert({dir + "/c", "-o", out, "--allow-non-finite"}, dir);
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(fs::exists(out));
  fs::remove(out);

  // F16 +inf (0x7c00) in a bias, BF16 -inf (0xff80) in the head: the library entry point says the same.
  std::string f16(16, '\0'), bf16(16 * 8 * 2, '\0');
  for (size_t i = 0; i < 8; ++i) f16[2 * i + 1] = 0x3c;  // 1.0
  f16[2 * 6] = 0x00, f16[2 * 6 + 1] = char(0x7c);
  for (size_t i = 0; i < 128; ++i) bf16[2 * i + 1] = 0x3f;  // 0.5
  bf16[2 * 100] = char(0x80), bf16[2 * 100 + 1] = char(0xff);
  write_tiny(dir + "/c", tiny, {{"layers.0.attn.k.bias", {"F16", {8}, f16}}});
  tern::Status st = tern::convert::convert_checkpoint(dir + "/c", out, {true});
  CHECK_THAT(st.message(), Catch::Contains("tensor 'layers.0.attn.k.bias': element 6 (index [6] of shape [8]) is +infinity"));
  write_tiny(dir + "/c", tiny, {{"lm_head.weight", {"BF16", {16, 8}, bf16}}});
  st = tern::convert::convert_checkpoint(dir + "/c", out, {true});
  CHECK_THAT(st.message(), Catch::Contains("tensor 'lm_head.weight': element 100 (index [12, 4] of shape [16, 8]) is -infinity"));
  tern::convert::ConvertOptions allow;
  allow.quiet = true;
  allow.allow_non_finite = true;
  CHECK(tern::convert::convert_checkpoint(dir + "/c", out, allow).ok());
}

TEST_CASE("convert hostile: output names up to NAME_MAX convert, the temporary name always fits", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_long_name");
  write_tiny(dir + "/c", Tiny{});
  fs::create_directories(dir + "/out");
  for (size_t len : {size_t(245), size_t(250), size_t(255)}) {
    INFO("name of " << len << " characters");
    const std::string name = std::string(len - 5, 'm') + ".tern";
    const Run r = convert({dir + "/c", "-o", dir + "/out/" + name, "-q"}, dir);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(fs::exists(dir + "/out/" + name));
    CHECK(count_temporaries(dir + "/out") == 0);
  }
  // Multi-byte characters are cut whole: "x" + 127 x "é", 255 bytes, whose temporary's name is cut at byte 243.
  std::string accented = "x";
  for (int i = 0; i < 127; ++i) accented += "\xc3\xa9";
  CHECK(convert({dir + "/c", "-o", dir + "/out/" + accented, "-q"}, dir).exit_code == 0);
  CHECK(fs::exists(dir + "/out/" + accented));
  // One past NAME_MAX is the system's refusal, named, before any work.
  expect_error(convert({dir + "/c", "-o", dir + "/out/" + std::string(256, 'x')}, dir), "File name too long");
}

TEST_CASE("convert hostile: impossible --weights or --group-size or --weight-type is refused by name", "[converter][hostile]") {
  const std::string scratch = tern::test::scratch_dir("convert_hostile_weights");
  const std::string golden = tern::test::source_path("tests/goldens/pre_tied_learned_gelu");
  const std::string out = scratch + "/m.tern";
  struct Case {
    std::vector<std::string> args;
    int status;
    const char* message;
  };
  const Case cases[] = {
      {{"--weights", "int3"}, 2, "--weights must be f32, f16, int8 or int4, not 'int3'"},
      {{"--weights"}, 2, "--weights needs f32, f16, int8 or int4"},
      {{"--weights", "int4", "--group-size", "48"}, 2, "--group-size needs a positive multiple of 32, got '48'"},
      {{"--weights", "int4", "--group-size", "-32"}, 2, "--group-size needs a positive multiple of 32, got '-32'"},
      {{"--weight-type", "f16"}, 2, "--weight-type needs PATTERN=FORMAT"},
      {{"--weight-type", "x=int2"}, 2, "--weight-type needs PATTERN=FORMAT"},
      // A layer norm's gain is read as float32 only; a pattern that matches nothing is a typo.
      {{"--weight-type", "final_norm.weight=int8"}, 1, "cannot be int8"},
      {{"--weights", "int8", "--weight-type", "no_such_tensor*=f32"}, 1, "no tensor matches 'no_such_tensor*'"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {golden, "-o", out, "-q"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Run r = convert(args, scratch);
    INFO("args: " << c.args[0] << (c.args.size() > 1 ? " " + c.args[1] : "") << "; stderr: " << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == c.status);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("convert hostile: a weight no int4 scale can reach is refused, an int8 group with infinity too", "[converter][hostile]") {
  const std::string dir = tern::test::scratch_dir("hostile_quant_range");
  const std::string out = dir + "/out.tern";
  Tiny tiny;
  tiny.config["hidden_size"] = 32;
  tiny.config["intermediate_size"] = 32;
  // q.weight [32, 32]: one element per case at row 2, element 5 (the converter fuses q, k and v into qkv.weight,
  // q's rows first).
  auto with_q = [&](float value) {
    std::vector<float> q = tern::test::random_floats(32 * 32, 9);
    q[2 * 32 + 5] = value;
    write_tiny(dir + "/c", tiny, {{"layers.0.attn.q.weight", {"F32", {32, 32}, f32_bytes(q)}}});
  };
  // 1e6 / 9 is past float16's 65504: every candidate scale of the group overflows.
  with_q(1e6f);
  Run r = convert({dir + "/c", "-o", out, "--weights", "int4"}, dir);
  expect_error(r, "row 2, elements [0, 32) holds 1000000.000000, beyond what int4 with a float16 scale holds (9 x 65504 = 589536)");
  CHECK_THAT(r.err, Catch::Contains("tensor 'layers.0.attn.qkv.weight': row 2, elements [0, 32)"));
  CHECK_FALSE(fs::exists(out));
  CHECK(count_temporaries(dir) == 0);
  // 4e5: -peak / 8 overflows float16, smaller candidates do not; the model converts and loads (finite scales).
  with_q(4e5f);
  r = convert({dir + "/c", "-o", out, "--weights", "int4", "-q"}, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  tern_model* m = nullptr;
  CHECK(tern_model_load(out.c_str(), &m) == TERN_OK);
  tern_model_free(m);
  fs::remove(out);
  // +inf under --allow-non-finite: int8 has no scale for it either.
  with_q(std::numeric_limits<float>::infinity());
  r = convert({dir + "/c", "-o", out, "--weights", "int8", "--allow-non-finite"}, dir);
  expect_error(r, "row 2, elements [0, 32) holds an infinite value");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("convert hostile: SentencePiece pieces are counted and measured before libsentencepiece reads them",
          "[converter][hostile][sentencepiece]") {
  const std::string dir = tern::test::scratch_dir("hostile_spiece");
  write_tiny(dir + "/c", Tiny());  // a vocabulary of 16: <unk> <s> </s> and 13 pieces
  std::vector<std::string> pieces;
  for (char c = 'a'; c < 'a' + 12; ++c) pieces.push_back(std::string(1, c));
  const std::string out = dir + "/model.tern";
  SECTION("one piece of 120,000 bytes (libsentencepiece's trie build overflowed the stack)") {
    pieces.push_back(std::string(120000, 'z'));
    tern::test::write_file(dir + "/long.model", tern::test::sentencepiece_model_proto(pieces));
    expect_error(convert({dir + "/c", "-o", out, "--tokenizer", dir + "/long.model"}, dir),
                 "long.model': piece 15 is 120000 bytes long; a token may be at most 1024 bytes");
    CHECK_FALSE(fs::exists(out));
  }
  SECTION("the longest piece allowed converts and loads") {
    pieces.push_back(std::string(1024, 'z'));
    tern::test::write_file(dir + "/longest.model", tern::test::sentencepiece_model_proto(pieces));
    const Run r = convert({dir + "/c", "-o", out, "--tokenizer", dir + "/longest.model"}, dir);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(fs::exists(out));
  }
  SECTION("3 million pieces for a vocabulary of 16 (building them first took over 20 s and 1.7 GB)") {
    pieces.clear();
    for (size_t i = 0; i < 3000000; ++i) pieces.push_back(std::to_string(i));
    tern::test::write_file(dir + "/many.model", tern::test::sentencepiece_model_proto(pieces));
    expect_error(convert({dir + "/c", "-o", out, "--tokenizer", dir + "/many.model"}, dir),
                 "many.model' holds 3000003 pieces; the model's vocabulary has 16 tokens");
  }
}
