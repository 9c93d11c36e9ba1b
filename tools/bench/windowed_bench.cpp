// SPDX-License-Identifier: MIT
// Dense vs windowed attention on one model: forward time and planned bytes for n in {1k, 4k, 16k, 64k},
// for the attention op alone and for the whole forward. A benchmark that prints numbers, not a test.
//
//   build/tools/bench/windowed_bench [--threads N] [--lengths 1024,4096,16384,65536] [--skip-dense-above N]
#include <pthreadpool.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "cli.h"
#include "cpu/kernels.h"
#include "graph_builder.h"
#include "importers/decoder_builder.h"
#include "ops/attention_pattern.h"
#include "tern/tern.h"
#include "writer.h"

using namespace tern;

namespace {

// The benchmark model: pre-LN reference-family layout, sinusoidal positions so any n is valid.
constexpr int64_t kVocab = 256, kModel = 256, kHeads = 4, kHeadDim = 64, kLayers = 4, kFfn = 1024;

struct Kind {
  std::string name;
  convert::AttentionKind params;
  AttentionPattern pattern;
};

std::vector<Kind> kinds() {
  std::vector<Kind> out;
  auto add = [&](std::string name, convert::AttentionKind params, AttentionPattern p) {
    p.heads = int(kHeads);
    out.push_back({std::move(name), params, p});
  };
  AttentionPattern p;
  add("dense", fb::DenseT{}, p);
  p.kind = PatternKind::kSliding;
  p.window = 256;
  add("sliding w=256", fb::SlidingWindowT{{}, 256}, p);
  p = {};
  p.kind = PatternKind::kChunked;
  p.chunk = 256;
  p.chunks_before = 1;
  add("chunked C=256 b=1", fb::ChunkedLocalT{{}, 256, 1, 0}, p);
  p = {};
  p.kind = PatternKind::kStrided;
  p.stride = 128;
  add("strided l=128", fb::StridedT{{}, 128, fb::SparseHeads::MERGED}, p);
  p = {};
  p.kind = PatternKind::kFixed;
  p.block = 128;
  p.summary = 16;
  add("fixed l=128 c=16", fb::FixedT{{}, 128, 16, fb::SparseHeads::MERGED}, p);
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

convert::TensorFill random_fill(uint32_t seed, float scale, float offset = 0.0f) {
  return [=](uint8_t* dst, size_t size) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-scale, scale);
    float* f = reinterpret_cast<float*>(dst);
    for (size_t i = 0; i < size / sizeof(float); ++i) f[i] = offset + dist(rng);
    return Status::Ok();
  };
}

// Writes the benchmark model with every layer's attention of `kind`; returns false with a message.
bool write_model(const Kind& kind, const std::string& path, std::string* error) {
  convert::GraphBuilder g;
  convert::DecoderBuilder b(g);
  uint32_t seed = 1;
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    return g.add_tensor(name, fb::DType::F32, std::move(shape), random_fill(seed++, scale, offset)).value();
  };
  auto build = [&]() -> Result<int32_t> {
    TERN_ASSIGN_OR_RETURN(int32_t ids, b.ids());
    const int32_t embed = tensor("embed", {kVocab, kModel}, 0.5f);
    TERN_ASSIGN_OR_RETURN(int32_t x, b.embedding("embed", ids, embed));
    TERN_ASSIGN_OR_RETURN(x, b.positions("pos", x, fb::PositionKind::SINUSOIDAL, 0, {-1}));
    const float w_scale = 1.0f / std::sqrt(float(kModel));
    const convert::LayerNames names{"ln1", "out", "res1", "ln2", "fc1", "act", "fc2", "res2"};
    for (int64_t l = 0; l < kLayers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      convert::DecoderLayer layer;  // pre-LN, no biases
      layer.attn_norm.weight = tensor(p + "ln1.w", {kModel}, 0.1f, 1.0f);
      const convert::AttentionOp attn{
          convert::attention_params(int32_t(kHeads), int32_t(kHeadDim), 1.0f / std::sqrt(float(kHeadDim)), kind.params),
          {tensor(p + "qkv.w", {3 * kModel, kModel}, w_scale), -1}, {}};
      layer.attn_out.weight = tensor(p + "out.w", {kModel, kModel}, w_scale);
      layer.mlp_norm.weight = tensor(p + "ln2.w", {kModel}, 0.1f, 1.0f);
      layer.mlp.up.weight = tensor(p + "fc1.w", {kFfn, kModel}, w_scale);
      layer.mlp.down.weight = tensor(p + "fc2.w", {kModel, kFfn}, w_scale);
      TERN_ASSIGN_OR_RETURN(x, b.layer(p, names, layer, x,
                                       [&](int32_t in) { return b.attention(p + "qkv", p + "attn", in, attn); }));
    }
    TERN_ASSIGN_OR_RETURN(x, b.norm("final_norm", x, {tensor("final_norm.w", {kModel}, 0.1f, 1.0f), -1, 1e-5f}));
    return b.head("logits", x, {embed, -1});  // tied
  };
  if (Result<int32_t> logits = build(); !logits.ok()) {
    *error = logits.status().message();
    return false;
  }
  g.metadata().architecture = "bench";
  g.metadata().vocab_size = kVocab;
  convert::WriteOptions wo;
  wo.quiet = true;
  Status st = convert::write_model(g, path, wo);
  if (!st.ok()) *error = st.message();
  return st.ok();
}

// Median of `reps` runs of fn, in seconds.
double time_median(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double attention_op_seconds(const Kind& kind, int64_t n, int threads) {
  std::vector<float> qkv(size_t(n * 3 * kModel)), out(size_t(n * kModel));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : qkv) v = dist(rng);
  std::vector<float> scratch(size_t(cpu::attention_scratch_floats(int(kHeadDim), threads)));
  pthreadpool_t pool = pthreadpool_create(size_t(threads));
  cpu::AttentionArgs args{&kind.pattern, qkv.data(), n, int(kHeads), int(kHeadDim), 0.125f, out.data(), scratch.data()};
  cpu::attention(pool, threads, args);  // warm-up
  double s = time_median(n <= 4096 ? 5 : 1, [&] { cpu::attention(pool, threads, args); });
  pthreadpool_destroy(pool);
  return s;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(bytes) / double(1 << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Args args(argc, argv, {"--threads", "--lengths", "--skip-dense-above"}, {"-h", "--help"});
  if (args.has("-h") || args.has("--help")) {
    std::puts("usage: windowed_bench [--threads N] [--lengths 1024,4096,16384,65536] [--skip-dense-above 16384]");
    return 0;
  }
  const int threads = int(args.get_int("--threads", 1, 1, 256));
  const int64_t skip_dense = args.get_int("--skip-dense-above", 16384, 1, int64_t(1) << 31);
  std::vector<int64_t> lengths;
  if (!bench::parse_list(args.get("--lengths", "1024,4096,16384,65536"), 1, int64_t(1) << 31, &lengths)) {
    std::fprintf(stderr, "windowed_bench: --lengths takes comma-separated positive whole numbers\n");
    return 2;
  }
  if (!args.ok()) {
    std::fprintf(stderr, "windowed_bench: %s\n", args.error().c_str());
    return 2;
  }
  std::printf("model: %lld layers, d %lld, %lld heads x %lld, ffn %lld, vocab %lld; %d thread(s)\n\n",
              (long long)kLayers, (long long)kModel, (long long)kHeads, (long long)kHeadDim, (long long)kFfn,
              (long long)kVocab, threads);
  std::printf("| kind | n | attention op s | vs dense | forward s | tokens/s | arena MiB | state MiB | dense n x n MiB |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> dense_op(lengths.size(), 0.0);
  for (const Kind& kind : kinds()) {
    std::string path = "/tmp/tern-windowed-bench.tern", error;
    if (!write_model(kind, path, &error)) {
      std::fprintf(stderr, "windowed_bench: %s\n", error.c_str());
      return 1;
    }
    tern_model* model = nullptr;
    if (tern_model_load(path.c_str(), &model) != TERN_OK) {
      std::fprintf(stderr, "windowed_bench: %s\n", tern_last_error());
      return 1;
    }
    for (size_t li = 0; li < lengths.size(); ++li) {
      const int64_t n = lengths[li];
      const bool is_dense = kind.pattern.kind == PatternKind::kDense;
      if (is_dense && n > skip_dense) {
        std::printf("| %s | %lld | skipped (quadratic) | | | | | | |\n", kind.name.c_str(), (long long)n);
        continue;
      }
      double op_s = attention_op_seconds(kind, n, threads);
      if (is_dense) dense_op[li] = op_s;
      tern_session* s = bench::open_session(model, threads, n);
      if (!s) {
        std::fprintf(stderr, "windowed_bench: %s\n", tern_last_error());
        return 1;
      }
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7919) % kVocab);
      std::vector<float> logits(size_t(n * kVocab));
      auto t0 = std::chrono::steady_clock::now();
      if (tern_session_forward(s, ids.data(), n, logits.data()) != TERN_OK) {
        std::fprintf(stderr, "windowed_bench: %s\n", tern_session_last_error(s));
        return 1;
      }
      double fwd_s = seconds_since(t0);
      tern_memory_plan plan{};
      tern_session_plan(s, n, &plan);
      char ratio[32] = "";
      if (!is_dense && dense_op[li] > 0) std::snprintf(ratio, sizeof ratio, "%.1fx", dense_op[li] / op_s);
      std::printf("| %s | %lld | %.4f | %s | %.3f | %.0f | %s | %s | %s |\n", kind.name.c_str(), (long long)n, op_s, ratio,
                  fwd_s, double(n) / fwd_s, mib(plan.arena_bytes).c_str(), mib(plan.state_bytes).c_str(),
                  mib(plan.dense_attention_bytes).c_str());
      std::fflush(stdout);
      tern_session_free(s);
    }
    tern_model_free(model);
  }
  std::printf("\npeak memory: %s\n", cli::format_bytes(cli::peak_rss_bytes()).c_str());
  return 0;
}
