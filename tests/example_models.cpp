// SPDX-License-Identifier: MIT
// The models the examples' ctest tests run on, converted into the build tree by the converter library:
//   kjv-byte.tern     the shipped model (examples/models/kjv-byte: dense attention, learned positions, context 256)
//   kjv-llama.tern    the shipped Llama-architecture model (examples/models/kjv-llama: Hugging Face layout with its
//                     tokenizer.model; RMS norms, rotary positions, grouped-query attention, SwiGLU)
//   kjv-stream.tern   the shipped bounded-state model (examples/models/kjv-stream: sliding-window attention, w = 128,
//                     no positions): its sessions stream any length in the state of one window
//   window-byte.tern  a bounded-state byte model: tern-reference, 2 layers, d 64, 4 heads, sliding-window attention
//                     (w = 64), sinusoidal positions, random weights (seeded; bits per byte near 8, since it has
//                     learnt nothing): a session of it streams any length in the state of one window
//
//   example_models SOURCE_DIR OUT_DIR
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "convert.h"

namespace {

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// Uniform in [-scale, scale) from std::mt19937 (whose sequence the standard fixes), or a constant.
Tensor make(const std::string& name, std::vector<int64_t> shape, std::mt19937& rng, float scale, float constant = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Tensor t{name, std::move(shape), std::vector<float>(size_t(n), constant)};
  if (scale > 0) {
    for (float& x : t.data) x = (float(rng() >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale;
  }
  return t;
}

// safetensors: u64 header length, JSON header (padded with spaces to 8 bytes), F32 data.
bool write_safetensors(const std::string& path, const std::vector<Tensor>& tensors) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    const uint64_t bytes = t.data.size() * sizeof(float);
    std::string shape;
    for (int64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t size = header.size();
  out.write(reinterpret_cast<const char*>(&size), 8);
  out.write(header.data(), std::streamsize(header.size()));
  for (const Tensor& t : tensors) out.write(reinterpret_cast<const char*>(t.data.data()), std::streamsize(t.data.size() * 4));
  return bool(out);
}

bool write_window_checkpoint(const std::string& dir) {
  const int64_t V = 256, d = 64, F = 256, layers = 2;
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << R"({
  "model_type": "tern-reference", "vocab_size": 256, "hidden_size": 64, "num_layers": 2, "num_heads": 4,
  "intermediate_size": 256, "max_position_embeddings": 512, "position_embedding": "sinusoidal",
  "norm_position": "pre", "activation": "gelu", "tie_word_embeddings": true,
  "attention": {"kind": "sliding", "window": 64}
})";
  std::mt19937 rng(2024);
  std::vector<Tensor> t;
  t.push_back(make("embed.weight", {V, d}, rng, 0.1f));
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* norm : {"attn_norm", "mlp_norm"}) {
      t.push_back(make(p + norm + ".weight", {d}, rng, 0, 1.0f));
      t.push_back(make(p + norm + ".bias", {d}, rng, 0));
    }
    for (const char* w : {"q", "k", "v", "out"}) {
      t.push_back(make(p + "attn." + w + ".weight", {d, d}, rng, 0.2f));
      t.push_back(make(p + "attn." + w + ".bias", {d}, rng, 0.02f));
    }
    t.push_back(make(p + "mlp.fc1.weight", {F, d}, rng, 0.1f));
    t.push_back(make(p + "mlp.fc1.bias", {F}, rng, 0.02f));
    t.push_back(make(p + "mlp.fc2.weight", {d, F}, rng, 0.05f));
    t.push_back(make(p + "mlp.fc2.bias", {d}, rng, 0.02f));
  }
  t.push_back(make("final_norm.weight", {d}, rng, 0, 1.0f));
  t.push_back(make("final_norm.bias", {d}, rng, 0));
  return write_safetensors(dir + "/model.safetensors", t);
}

bool convert(const std::string& checkpoint, const std::string& out) {
  tern::convert::ConvertOptions options;
  options.quiet = true;
  const tern::Status st = tern::convert::convert_checkpoint(checkpoint, out, options);
  if (!st.ok()) std::fprintf(stderr, "example_models: %s: %s\n", checkpoint.c_str(), st.message().c_str());
  else std::printf("wrote %s\n", out.c_str());
  return st.ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: example_models SOURCE_DIR OUT_DIR\n");
    return 2;
  }
  const std::string source = argv[1], out = argv[2];
  std::filesystem::create_directories(out);
  if (!convert(source + "/examples/models/kjv-byte", out + "/kjv-byte.tern")) return 1;
  if (!convert(source + "/examples/models/kjv-stream", out + "/kjv-stream.tern")) return 1;
  if (!convert(source + "/examples/models/kjv-llama", out + "/kjv-llama.tern")) return 1;
  if (!write_window_checkpoint(out + "/window-byte")) {
    std::fprintf(stderr, "example_models: cannot write %s/window-byte\n", out.c_str());
    return 1;
  }
  return convert(out + "/window-byte", out + "/window-byte.tern") ? 0 : 1;
}
