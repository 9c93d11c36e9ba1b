// SPDX-License-Identifier: MIT
// Bucketed attention (Reformer LSH, Routing Transformer k-means clusters) vs dense attention, one layer each with the
// same heads and head_dim: the attention op's time (measured, per thread count) and its bytes (the planner's) for n in
// {4k, 16k, 64k}. A benchmark that prints numbers, not a test.
//
//   build/tools/bench/bucketed_bench [--threads 1,2] [--lengths 4096,16384,65536] [--skip-dense-above N]
//
// Each model is ids -> EMBEDDING (random rows: the attention's input, [n, 2*H*dh] for LSH's shared qk | v, [n,
// 3*H*dh] for q | k | v) -> ATTENTION -> output [n, H*dh]. The LSH layer has google/reformer-enwik8's LSH settings
// (chunk 256, one chunk before, 4 hashing rounds, 512 buckets); the routing layer routes every head through 128
// clusters of 256 members (random unit-variance centroids); heads and head_dim are small so that dense attention at
// 64k tokens finishes in minutes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench_common.h"
#include "cli.h"
#include "graph_builder.h"
#include "tern/tern.h"
#include "writer.h"

using namespace tern;

namespace {

constexpr int64_t kHeads = 2, kHeadDim = 32, kInner = kHeads * kHeadDim, kRows = 1024;
constexpr int32_t kChunk = 256, kChunksBefore = 1, kHashes = 4, kBuckets = 512;
constexpr int32_t kClusters = 128, kWindow = 256;

enum class Kind { kDense, kLsh, kRouting };
const char* const kKindNames[] = {"dense", "LSH", "routing"};

convert::TensorFill random_fill(uint32_t seed, float lo, float hi) {
  return [=](uint8_t* dst, size_t size) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    float* f = reinterpret_cast<float*>(dst);
    for (size_t i = 0; i < size / sizeof(float); ++i) f[i] = dist(rng);
    return Status::Ok();
  };
}

int64_t input_width(Kind kind) { return (kind == Kind::kLsh ? 2 : 3) * kInner; }

bool write_model(Kind kind, const std::string& path, std::string* error) {
  const bool lsh = kind == Kind::kLsh;
  convert::GraphBuilder g;
  const int32_t ids = g.add_value("ids", fb::DType::I32, 1).value();
  (void)g.add_input(ids);
  const int32_t table = g.add_tensor("rows", fb::DType::F32, {kRows, input_width(kind)}, random_fill(1, -1.0f, 1.0f)).value();
  const int32_t x = g.add_value("x", fb::DType::F32, input_width(kind)).value();
  (void)g.add_op(fb::OpCode::EMBEDDING, "rows", {ids}, {x}, {table}, fb::EmbeddingParamsT{});
  fb::AttentionParamsT attn;
  attn.heads = int32_t(kHeads);
  attn.head_dim = int32_t(kHeadDim);
  attn.scale = float(1.0 / std::sqrt(double(kHeadDim)));
  std::vector<int32_t> weights;
  if (lsh) {
    fb::LshT k;
    k.chunk = kChunk;
    k.chunks_before = kChunksBefore;
    k.hashes = kHashes;
    k.buckets = {kBuckets};
    k.pad_to = kChunk;
    k.pad_above = kChunk;
    attn.kind.Set(k);
    weights.push_back(g.add_tensor("rotations", fb::DType::F32, {kHeads, kHeadDim, kHashes, kBuckets / 2},
                                   random_fill(2, -1.5f, 1.5f))
                          .value());
  } else if (kind == Kind::kRouting) {
    attn.kind.Set(fb::RoutingT{{}, kClusters, kWindow, 0, 1});
    weights.push_back(
        g.add_tensor("centroids", fb::DType::F32, {kHeads, kClusters, kHeadDim}, random_fill(3, -1.7f, 1.7f)).value());
  } else {
    attn.kind.Set(fb::DenseT{});
  }
  const int32_t y = g.add_value("y", fb::DType::F32, kInner).value();
  auto added = g.add_op(fb::OpCode::ATTENTION, "attention", {x}, {y}, weights, attn);
  if (!added.ok()) {
    *error = added.status().message();
    return false;
  }
  (void)g.add_output(y);
  g.metadata().architecture = "bench";
  g.metadata().vocab_kind = fb::VocabKind::EXTERNAL;
  g.metadata().vocab_size = kInner;
  convert::WriteOptions wo;
  wo.quiet = true;
  const Status st = convert::write_model(g, path, wo);
  if (!st.ok()) *error = st.message();
  return st.ok();
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / double(1 << 20));
  return buf;
}

struct Row {
  double seconds = 0;     // the attention op alone (session profile), median of the timed runs
  tern_memory_plan plan{};
};

// One session of `threads` on the model; a warm-up and 3 timed runs below 16k tokens, one run from 16k on.
bool measure(tern_model* model, int64_t n, int threads, Row* row) {
  tern_session* s = bench::open_session(model, threads, n);
  if (!s) return false;
  std::vector<int32_t> ids(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t((i * 7919) % kRows);
  std::vector<float> out(size_t(n * kInner));
  const int reps = n < 16384 ? 3 : 1;
  std::vector<double> times;
  for (int r = 0; r < reps + (n < 16384 ? 1 : 0); ++r) {
    tern_session_set_profiling(s, 1);
    if (tern_session_forward(s, ids.data(), n, out.data()) != TERN_OK) {
      std::fprintf(stderr, "bucketed_bench: %s\n", tern_session_last_error(s));
      tern_session_free(s);
      return false;
    }
    tern_op_profile prof[2];
    size_t count = 0;
    tern_session_get_profile(s, prof, 2, &count);
    if (r > 0 || n >= 16384) times.push_back(double(prof[1].total_ns) * 1e-9);  // op 1: the attention
  }
  std::sort(times.begin(), times.end());
  row->seconds = times[times.size() / 2];
  tern_session_plan(s, n, &row->plan);
  tern_session_free(s);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cli::Args args(argc, argv, {"--threads", "--lengths", "--skip-dense-above"}, {"-h", "--help"});
  if (args.has("-h") || args.has("--help")) {
    std::puts("usage: bucketed_bench [--threads 1,2] [--lengths 4096,16384,65536] [--skip-dense-above N]");
    return 0;
  }
  std::vector<int64_t> thread_counts, lengths;
  if (!bench::parse_list(args.get("--threads", "1,2"), 1, 256, &thread_counts) ||
      !bench::parse_list(args.get("--lengths", "4096,16384,65536"), 1, int64_t(1) << 31, &lengths)) {
    std::fprintf(stderr, "bucketed_bench: --threads and --lengths take comma-separated positive whole numbers\n");
    return 2;
  }
  const int64_t skip_dense = args.get_int("--skip-dense-above", int64_t(1) << 31, 1, int64_t(1) << 31);
  if (!args.ok()) {
    std::fprintf(stderr, "bucketed_bench: %s\n", args.error().c_str());
    return 2;
  }
  tern_model* models[3] = {nullptr, nullptr, nullptr};  // by Kind
  for (int k = 0; k < 3; ++k) {
    const std::string path = "/tmp/tern-bucketed-bench-" + std::to_string(getpid()) + "-" + kKindNames[k] + ".tern";
    std::string error;
    if (!write_model(Kind(k), path, &error) || tern_model_load(path.c_str(), &models[k]) != TERN_OK) {
      std::fprintf(stderr, "bucketed_bench: %s\n", error.empty() ? tern_last_error() : error.c_str());
      return 1;
    }
    std::remove(path.c_str());  // the mapping keeps the file
  }
  std::printf("one attention layer: %lld heads x %lld, causal; LSH: chunk %d, %d chunk before, %d hashes, %d buckets; "
              "routing: %d clusters of %d\n",
              (long long)kHeads, (long long)kHeadDim, kChunk, kChunksBefore, kHashes, kBuckets, kClusters, kWindow);
  std::printf("time: the attention op alone (median of 3 after a warm-up below 16k tokens, one run from 16k)\n");
  std::printf("MiB: the planner's arena + state for a call of n tokens (dense attention runs in row blocks over its\n"
              "KV cache, the state; LSH and routing hold their whole input in the arena)\n");
  std::printf("scratch: the arena less the op's input [n, %lld] (LSH) or [n, %lld] (routing)\n\n",
              (long long)input_width(Kind::kLsh), (long long)input_width(Kind::kRouting));
  std::printf("| n | threads | dense s | LSH s | routing s | dense / LSH | dense / routing | dense MiB | LSH MiB | "
              "routing MiB | LSH scratch B/token | routing scratch B/token | n x n scores MiB |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t n : lengths) {
    for (int64_t threads : thread_counts) {
      Row rows[3];
      const bool run_dense = n <= skip_dense;
      for (int k = 0; k < 3; ++k) {
        if (k == 0 && !run_dense) continue;
        if (!measure(models[k], n, int(threads), &rows[k])) {
          std::fprintf(stderr, "bucketed_bench: %s\n", tern_last_error());
          return 1;
        }
      }
      const auto scratch = [n](const Row& r, Kind kind) {
        return double(r.plan.arena_bytes) - double(n * input_width(kind)) * sizeof(float);
      };
      const auto total = [](const Row& r) { return double(r.plan.arena_bytes) + double(r.plan.state_bytes); };
      const double lsh_scratch = scratch(rows[1], Kind::kLsh), routing_scratch = scratch(rows[2], Kind::kRouting);
      char dense_s[32] = "skipped", lsh_ratio[32] = "", routing_ratio[32] = "", dense_mib[32] = "";
      if (run_dense) {
        std::snprintf(dense_s, sizeof dense_s, "%.3f", rows[0].seconds);
        std::snprintf(lsh_ratio, sizeof lsh_ratio, "%.1fx", rows[0].seconds / rows[1].seconds);
        std::snprintf(routing_ratio, sizeof routing_ratio, "%.1fx", rows[0].seconds / rows[2].seconds);
        std::snprintf(dense_mib, sizeof dense_mib, "%s", mib(total(rows[0])).c_str());
      }
      std::printf("| %lld | %lld | %s | %.3f | %.3f | %s | %s | %s | %s | %s | %.0f | %.0f | %s |\n", (long long)n,
                  (long long)threads, dense_s, rows[1].seconds, rows[2].seconds, lsh_ratio, routing_ratio, dense_mib,
                  mib(total(rows[1])).c_str(), mib(total(rows[2])).c_str(), lsh_scratch / double(n),
                  routing_scratch / double(n), mib(double(rows[1].plan.dense_attention_bytes)).c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\npeak memory: %s\n", cli::format_bytes(cli::peak_rss_bytes()).c_str());
  for (tern_model* m : models) tern_model_free(m);
  return 0;
}
