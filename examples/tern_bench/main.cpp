// SPDX-License-Identifier: MIT
// tern-bench: on-device latency and memory of a .tern model, llama-bench style.
//   pp<N>      prefill: one forward of N tokens
//   tg<N>@d<D> generation: N tokens appended one at a time after D tokens already in the state
#include <algorithm>
#include <cstdio>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "cli.h"
#include "contention.h"
#include "format/temp_file.h"
#include "tern/tern.h"

namespace {

const char* kUsage = R"(usage: tern-bench MODEL.tern [options]

Measures load time, session creation, prefill (pp<N>) and generation (tg<N>@d<D>) on the CPU, with the
planner's memory numbers and the process's peak resident memory, on the CPU or a Vulkan device.
  -p, --prefill LIST     prefill lengths (default 512)
  -n, --generate LIST    generation lengths (default 128; 0 for none)
  -d, --depth LIST       tokens already in the state before generating (default 0)
  -r, --repetitions N    timed runs after one warm-up (default 5)
  -t, --threads LIST     thread counts, at most the hardware threads (default 1; 0: the library's default, every
                         hardware thread while the cores are free, the calling thread alone while they are not)
  -o, --output FORMAT    md | json | csv (default md)
  --profile              time every op during the warm runs (a tg test's steps, not the calls that fill its
                         depth); print them sorted by time, with GFLOP/s per op kind (md output)
  --backend B            cpu | vulkan | auto (default cpu); auto takes a Vulkan GPU when the model runs there
  --device N             Vulkan device N as vulkaninfo numbers them (GPU0 is 0; default: the best device)
  --f16-weights          Vulkan: store LINEAR weights and EMBEDDING tables as float16 on the device (half their
                         memory; compute stays float32); needs storageBuffer16BitAccess. The output says the storage
  --f16-activations      CPU: store the whole-sequence values kept between row blocks (Reformer's residual
                         streams around LSH layers) as float16: half their memory, results change at ~1e-3
  --f16-kv               CPU: keep the keys and values of dense, sliding, chunked, strided and fixed attention as
                         float16 (half the state, which tg@dN reads per token); results change at ~1e-3
  --compete N            every test measured twice: alone, then beside N processes that only spin (one core each),
                         as on a machine that runs other work; both figures printed side by side
  --sessions N           instead of the tests: N sessions on N threads at once, each a forward of the first -p
                         length (0: none) then the first -n length of one-token appends, timed with threads = 1
                         and with the default (0: the cores shared among the sessions' calls), alternated -r times
  --row-block-rows N     CPU: rows per block of the ops that run in blocks (default 0: each chain of them picks
                         its own; a number at least the prefill length runs every op on the whole call at once)
  --version              versions (tool, library, .tern formats) and build
  -h, --help             this text
LIST is comma-separated, e.g. -p 512,2048 -t 1,2.
)";

struct Test {
  std::string name;
  int threads = 1;
  int64_t prefill = 0, generate = 0, depth = 0;
  int64_t n_tokens = 0;  // tokens timed
  std::vector<double> ms;
  std::vector<double> compete_ms;  // --compete: the timed runs beside the busy processes
  double first_ms = 0, create_ms = 0;
  tern_memory_plan plan{};
  uint64_t peak_rss = 0;
  std::string skipped;
  std::string backend = "cpu", device = "CPU", driver;  // where the session ran (tern_session_get_backend)
  bool f16_weights = false;  // ran on Vulkan with weight_storage F16
  bool f16_activations = false;  // ran on the CPU with activation_storage F16
  bool f16_kv = false;           // ran on the CPU with kv_storage F16
  // tern_session_count_dispatches: the device dispatches of one timed call (the prefill, or one generated token at
  // the test's depth); 0 on the CPU
  uint64_t dispatches = 0;
  struct OpTime {
    std::string name, kind;
    int64_t calls;
    uint64_t ns;
    uint64_t flops;  // tern_session_get_profile_flops: 0 where the op does not count them
    uint64_t dispatches;  // the op's share of Test::dispatches
  };
  std::vector<OpTime> profile;  // warm runs only, slowest first
};

bool parse_list(const std::string& text, int64_t lo, std::vector<int64_t>* out) {
  out->clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < lo || v > (1LL << 31)) return false;
    out->push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return !out->empty();
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t i = size_t(q * double(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The session's per-op profile so far: calls, ns and flops per op, in graph order.
struct ProfileTotals {
  std::vector<tern_op_profile> ops;
  std::vector<uint64_t> flops;
};
ProfileTotals profile_totals(const tern_session* s) {
  ProfileTotals p;
  size_t count = 0;
  tern_session_get_profile(s, nullptr, 0, &count);
  p.ops.resize(count);
  tern_session_get_profile(s, p.ops.data(), count, &count);
  p.flops.resize(count);
  tern_session_get_profile_flops(s, p.flops.data(), count, &count);
  return p;
}

// Runs one test; returns false with a message on a runtime error.
// `base`: the session options the command line sets (backend, device, storage, row blocks).
bool run_test(const tern_model* model, const tern_session_options& base, int64_t vocab, int64_t context, int reps,
              bool profile, Test* t, std::string* error) {
  const int64_t total = t->prefill > 0 ? t->prefill : t->depth + t->generate;
  if (context > 0 && total > context) {
    t->skipped = "needs " + std::to_string(total) + " tokens, the model's context is " + std::to_string(context);
    return true;
  }
  // The test's own buffers (its ids and one call's logits), checked before the session or they are allocated.
  const int64_t logit_rows = std::max(t->prefill, int64_t(1));
  const double harness_bytes = double(total) * 4.0 + double(logit_rows) * double(vocab) * 4.0;
  std::string memory_name;
  const uint64_t memory = tern::cli::usable_memory(&memory_name);
  if (harness_bytes > double(memory)) {
    *error = "its " + std::to_string(total) + " ids and " + std::to_string(logit_rows) + " x " +
             std::to_string(vocab) + " float32 logits need " + tern::cli::format_bytes(uint64_t(harness_bytes)) +
             ", more than " + memory_name + " (" + tern::cli::format_bytes(memory) + "); ask for fewer tokens";
    return false;
  }
  tern_session_options so = base;
  so.threads = t->threads;
  so.max_tokens = total;
  so.max_batch = std::max<int64_t>(1, t->prefill > 0 ? t->prefill : std::max(t->depth, int64_t(1)));
  // A prefill test only runs forwards: no state for later calls (a Reformer LSH layer's generation cache), as an
  // app that only scores would create its session.
  so.forward_only = t->prefill > 0 ? 1 : 0;
  tern_session* s = nullptr;
  tern::cli::Timer create;
  if (tern_session_create(model, &so, &s) != TERN_OK) {
    *error = tern_last_error();
    return false;
  }
  t->create_ms = create.seconds() * 1e3;
  tern_backend_info where{};
  tern_session_get_backend(s, &where);
  t->backend = where.backend == TERN_BACKEND_VULKAN ? "vulkan" : "cpu";
  t->device = where.device_name;
  t->driver = where.driver;
  // backend auto: float16 weights only on Vulkan, float16 activations only on the CPU
  t->f16_weights = so.weight_storage == TERN_WEIGHT_STORAGE_F16 && where.backend == TERN_BACKEND_VULKAN;
  t->f16_activations = so.activation_storage == TERN_ACTIVATION_STORAGE_F16 && where.backend == TERN_BACKEND_CPU;
  t->f16_kv = so.kv_storage == TERN_KV_STORAGE_F16 && where.backend == TERN_BACKEND_CPU;
  tern_session_plan(s, total, &t->plan);
  size_t op_count = 0;
  tern_session_get_profile(s, nullptr, 0, &op_count);
  std::vector<uint64_t> op_dispatches(op_count);
  if (tern_session_count_dispatches(s, t->prefill > 0 ? t->prefill : 1, t->prefill > 0 ? 0 : t->depth,
                                    op_dispatches.data(), op_count, &op_count, &t->dispatches) != TERN_OK) {
    *error = tern_session_last_error(s);
    tern_session_free(s);
    return false;
  }
  std::mt19937 rng(42);
  std::vector<int32_t> ids(static_cast<size_t>(total));
  for (auto& id : ids) id = int32_t(rng() % uint64_t(vocab));
  std::vector<float> logits(size_t(logit_rows * vocab));
  bool profiling = false;
  ProfileTotals setup;  // what the untimed depth calls added to the profile, taken out of it at the end
  auto once = [&]() -> bool {
    tern::cli::Timer timer;
    if (t->prefill > 0) {
      if (tern_session_forward(s, ids.data(), t->prefill, logits.data()) != TERN_OK) return false;
      t->ms.push_back(timer.seconds() * 1e3);
      return true;
    }
    tern_session_reset(s);
    if (t->depth > 0) {
      const ProfileTotals before = profiling ? profile_totals(s) : ProfileTotals{};
      if (tern_session_append(s, ids.data(), t->depth, nullptr) != TERN_OK) return false;
      if (profiling) {
        const ProfileTotals after = profile_totals(s);
        setup.ops.resize(after.ops.size());
        setup.flops.resize(after.ops.size());
        for (size_t i = 0; i < after.ops.size(); ++i) {
          setup.ops[i].calls += after.ops[i].calls - before.ops[i].calls;
          setup.ops[i].total_ns += after.ops[i].total_ns - before.ops[i].total_ns;
          setup.flops[i] += after.flops[i] - before.flops[i];
        }
      }
    }
    tern::cli::Timer gen;  // depth is set up, not timed (nor profiled)
    for (int64_t i = 0; i < t->generate; ++i) {
      const tern_status st = tern_session_append(s, &ids[size_t(t->depth + i)], 1, logits.data());
      if (st == TERN_UNSUPPORTED && t->depth + i > 0) {
        // Routing layers continue a sequence on the CPU only: on Vulkan, no token-by-token generation.
        t->skipped = "the model runs whole sequences only on this backend (no token-by-token generation)";
        return false;
      }
      if (st != TERN_OK) return false;
    }
    t->ms.push_back(gen.seconds() * 1e3);
    return true;
  };
  bool ok = once();  // first run: cold caches, first touch of the arena
  if (ok) {
    t->first_ms = t->ms.back();
    t->ms.clear();
    if (profile) tern_session_set_profiling(s, 1);
    profiling = profile;
    for (int r = 0; r < reps && ok; ++r) ok = once();
  }
  if (ok && profile) {
    ProfileTotals p = profile_totals(s);
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const tern_op_profile& op = p.ops[i];
      const bool set_up = i < setup.ops.size();
      const int64_t calls = op.calls - (set_up ? setup.ops[i].calls : 0);
      const uint64_t ns = op.total_ns - (set_up ? setup.ops[i].total_ns : 0);
      const uint64_t flops = p.flops[i] - (set_up ? setup.flops[i] : 0);
      const uint64_t dispatches = i < op_dispatches.size() ? op_dispatches[i] : 0;
      if (calls > 0) t->profile.push_back({op.name, op.kind, calls, ns, flops, dispatches});
    }
    std::sort(t->profile.begin(), t->profile.end(), [](const auto& a, const auto& b) { return a.ns > b.ns; });
  }
  if (!ok && !t->skipped.empty()) {  // a test this model cannot run: reported as skipped, not as an error
    ok = true;
    t->ms.clear();
  }
  if (!ok) *error = tern_session_last_error(s);
  t->peak_rss = tern::cli::peak_rss_bytes();
  tern_session_free(s);
  return ok;
}

void print_md(const std::vector<Test>& tests, const std::string& model, double load_ms) {
  std::printf("model: %s (loaded and verified in %.2f ms)\n", model.c_str(), load_ms);
  // What identifies the machine and the build, so that reports from different devices can be compared.
  std::printf("cpu: %s\n", tern_cpu_description());
  std::printf("build: libtern %s, %s\n", tern_version(), tern::cli::build_summary());
  for (const Test& t : tests) {
    if (!t.skipped.empty()) continue;
    if (t.backend == "vulkan") {
      std::printf("backend: vulkan, device: %s, driver: %s\n", t.device.c_str(), t.driver.c_str());
      std::printf("weights: %s, %s on the device\n",
                  t.f16_weights ? "float16 storage for LINEAR weights and EMBEDDING tables (--f16-weights)" : "float32",
                  tern::cli::format_bytes(t.plan.packed_weight_bytes).c_str());
    } else {
      std::printf("backend: cpu, %s\n", t.driver.c_str());  // "kernels: avx512": the CPU kernels' instruction set
      if (t.plan.packed_weight_bytes > 0) {
        std::printf("packed weights: %s, shared by the model's sessions (one copy per model)\n",
                    tern::cli::format_bytes(t.plan.packed_weight_bytes).c_str());
      }
      if (t.f16_activations) std::printf("activations: float16 storage between row blocks (--f16-activations)\n");
      if (t.f16_kv) std::printf("attention keys and values: float16 (--f16-kv)\n");
    }
    break;
  }
  // On a device, the dispatches of one timed call: the prefill, or one generated token at the test's depth.
  const bool device = std::any_of(tests.begin(), tests.end(), [](const Test& t) { return t.backend == "vulkan"; });
  std::printf("\n");
  std::printf("| test | threads | t/s | median ms | p90 ms | min ms | first ms | create ms | peak RSS | arena | state | dense n x n |%s\n",
              device ? " dispatches per call |" : "");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n", device ? "---:|" : "");
  for (const Test& t : tests) {
    if (!t.skipped.empty()) {
      std::printf("| %s | %d | skipped: %s |||||||||%s\n", t.name.c_str(), t.threads, t.skipped.c_str(), device ? "|" : "");
      continue;
    }
    double med = percentile(t.ms, 0.5);
    std::printf("| %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s |", t.name.c_str(), t.threads,
                double(t.n_tokens) / (med / 1e3), med, percentile(t.ms, 0.9), percentile(t.ms, 0.0), t.first_ms,
                t.create_ms, tern::cli::format_bytes(t.peak_rss).c_str(),
                tern::cli::format_bytes(t.plan.arena_bytes).c_str(), tern::cli::format_bytes(t.plan.state_bytes).c_str(),
                tern::cli::format_bytes(t.plan.dense_attention_bytes).c_str());
    if (device) std::printf(" %llu |", (unsigned long long)t.dispatches);
    std::printf("\n");
  }
  if (device) std::printf("\ndispatches per call: the prefill's, or one generated token's at the test's depth\n");
}

// --compete: each test's speed alone and beside the busy processes.
void print_compete(const std::vector<Test>& tests, int busy) {
  std::printf("\n| test | threads | t/s alone | t/s beside %d busy process%s | beside / alone |\n|---|---:|---:|---:|---:|\n",
              busy, busy == 1 ? "" : "es");
  for (const Test& t : tests) {
    if (!t.skipped.empty() || t.compete_ms.empty()) continue;
    const double alone = double(t.n_tokens) / (percentile(t.ms, 0.5) / 1e3);
    const double beside = double(t.n_tokens) / (percentile(t.compete_ms, 0.5) / 1e3);
    std::printf("| %s | %d | %.1f | %.1f | %.2f |\n", t.name.c_str(), t.threads, alone, beside, beside / alone);
  }
}

// GFLOP/s of `flops` in `ns`, or "-" where the ops do not count their operations.
std::string gflops_per_s(uint64_t flops, uint64_t ns) {
  if (flops == 0 || ns == 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", double(flops) / double(ns));
  return text;
}

// Per test: time and speed by op kind, then the slowest ops.
void print_profile(const std::vector<Test>& tests) {
  for (const Test& t : tests) {
    if (t.profile.empty()) continue;
    struct Kind {
      std::string name;
      uint64_t ns = 0, flops = 0, counted_ns = 0;  // counted_ns: time of the ops that count their flops
    };
    uint64_t total = 0;
    std::vector<Kind> by_kind;
    for (const auto& op : t.profile) {
      total += op.ns;
      auto it = std::find_if(by_kind.begin(), by_kind.end(), [&](const Kind& k) { return k.name == op.kind; });
      if (it == by_kind.end()) it = by_kind.insert(by_kind.end(), Kind{op.kind});
      it->ns += op.ns;
      if (op.flops > 0) it->flops += op.flops, it->counted_ns += op.ns;
    }
    std::sort(by_kind.begin(), by_kind.end(), [](const Kind& a, const Kind& b) { return a.ns > b.ns; });
    std::printf("\nprofile of %s, %d thread(s), %zu warm runs:\n\n| op kind | ms per run | share | GFLOP/s |\n"
                "|---|---:|---:|---:|\n",
                t.name.c_str(), t.threads, t.ms.size());
    const double runs = double(t.ms.size());
    for (const Kind& k : by_kind) {
      std::printf("| %s | %.3f | %.1f%% | %s |\n", k.name.c_str(), double(k.ns) / 1e6 / runs,
                  100.0 * double(k.ns) / double(total), gflops_per_s(k.flops, k.counted_ns).c_str());
    }
    const bool device = t.backend == "vulkan";  // with each op's dispatches per call
    std::printf("\n| op | kind | calls per run | ms per run | GFLOP/s |%s\n|---|---|---:|---:|---:|%s\n",
                device ? " dispatches per call |" : "", device ? "---:|" : "");
    for (size_t i = 0; i < t.profile.size() && i < 10; ++i) {
      const auto& op = t.profile[i];
      std::printf("| %s | %s | %.0f | %.3f | %s |", op.name.c_str(), op.kind.c_str(), double(op.calls) / runs,
                  double(op.ns) / 1e6 / runs, gflops_per_s(op.flops, op.ns).c_str());
      if (device) std::printf(" %llu |", (unsigned long long)op.dispatches);
      std::printf("\n");
    }
    std::printf("\nGFLOP/s: the operations an op must compute, from its shapes (a multiply-add counts two; "
                "attention: 4 x head_dim per query-key pair its pattern shows), over its time; - where not counted.\n");
  }
}

// A string as the inside of a JSON string literal.
std::string json_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

void print_rows(const std::vector<Test>& tests, double load_ms, bool json) {
  if (json) std::printf("[\n");
  else std::printf("test,backend,threads,n_tokens,median_ms,p90_ms,min_ms,first_ms,create_ms,load_ms,tokens_per_s,peak_rss_bytes,weight_bytes,arena_bytes,state_bytes,dense_attention_bytes,packed_weight_bytes,weight_storage,activation_storage,kv_storage,dispatches_per_call,tokens_per_s_beside_busy\n");
  bool first = true;
  for (const Test& t : tests) {
    if (!t.skipped.empty()) {  // JSON keeps the test and why it did not run; CSV rows are measurements only
      if (json) {
        std::printf("%s  {\"test\": \"%s\", \"threads\": %d, \"skipped\": \"%s\"}", first ? "" : ",\n", t.name.c_str(),
                    t.threads, t.skipped.c_str());
        first = false;
      }
      continue;
    }
    double med = percentile(t.ms, 0.5);
    const char* fmt = json
        ? "%s  {\"test\": \"%s\", \"backend\": \"%s\", \"device\": \"%s\", \"driver\": \"%s\", \"threads\": %d, \"n_tokens\": %lld, \"median_ms\": %.4f, "
          "\"p90_ms\": %.4f, \"min_ms\": %.4f, \"first_ms\": %.4f, \"create_ms\": %.4f, \"load_ms\": %.4f, "
          "\"tokens_per_s\": %.3f, \"peak_rss_bytes\": %llu, \"weight_bytes\": %llu, \"arena_bytes\": %llu, "
          "\"state_bytes\": %llu, \"dense_attention_bytes\": %llu, \"packed_weight_bytes\": %llu, \"weight_storage\": \"%s\", "
          "\"activation_storage\": \"%s\", \"kv_storage\": \"%s\", \"dispatches_per_call\": %llu, \"cpu\": \"%s\", \"library\": \"%s\", \"build\": \"%s\""
        : "%s%s,%s%.0s%.0s,%d,%lld,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f,%llu,%llu,%llu,%llu,%llu,%llu,%s,%s,%s,%llu%.0s%.0s%.0s";
    std::printf(fmt, json ? (first ? "" : ",\n") : "", t.name.c_str(), t.backend.c_str(), json_escape(t.device).c_str(),
                json_escape(t.driver).c_str(), t.threads, (long long)t.n_tokens, med,
                percentile(t.ms, 0.9), percentile(t.ms, 0.0), t.first_ms, t.create_ms, load_ms,
                double(t.n_tokens) / (med / 1e3), (unsigned long long)t.peak_rss,
                (unsigned long long)t.plan.weight_bytes, (unsigned long long)t.plan.arena_bytes,
                (unsigned long long)t.plan.state_bytes, (unsigned long long)t.plan.dense_attention_bytes,
                (unsigned long long)t.plan.packed_weight_bytes, t.f16_weights ? "f16" : "f32",
                t.f16_activations ? "f16" : "f32", t.f16_kv ? "f16" : "f32", (unsigned long long)t.dispatches,
                json_escape(tern_cpu_description()).c_str(), tern_version(),
                json_escape(tern::cli::build_summary()).c_str());
    // --compete: the speed beside the busy processes (an empty CSV field, no JSON key, without it)
    const double beside = t.compete_ms.empty() ? 0.0 : double(t.n_tokens) / (percentile(t.compete_ms, 0.5) / 1e3);
    if (json) std::printf(t.compete_ms.empty() ? "}" : ", \"tokens_per_s_beside_busy\": %.3f}", beside);
    else if (t.compete_ms.empty()) std::printf(",\n");
    else std::printf(",%.3f\n", beside);
    first = false;
  }
  if (json) std::printf("\n]\n");
}

int fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "tern-bench: error: %s\n", message.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  tern::report_truncated_mappings("tern-bench");
  tern::cli::Args args(argc, argv,
                       {"-p", "--prefill", "-n", "--generate", "-d", "--depth", "-r", "--repetitions", "-t", "--threads",
                        "-o", "--output", "--backend", "--device", "--row-block-rows", "--compete", "--sessions"},
                       {"-h", "--help", "--version", "--profile", "--f16-weights", "--f16-activations", "--f16-kv"});
  if (args.has("-h") || args.has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.has("--version")) {
    tern::cli::print_version("tern-bench");
    return 0;
  }
  auto opt = [&](const char* s, const char* l, const char* fallback) {
    return args.has(s) ? args.get(s) : args.get(l, fallback);
  };
  // Errors name the flag as the user typed it (the short or the long form) and the value given.
  auto bad = [&](const char* s, const char* l, const char* fallback, const std::string& expected) {
    const char* typed = args.has(s) ? s : l;
    return fail(std::string(typed) + " '" + opt(s, l, fallback) + "': expected " + expected, 2);
  };
  std::vector<int64_t> prefill, generate, depth, threads;
  if (!args.ok()) return fail(args.error(), 2);
  if (args.positional().size() != 1) return fail(std::string("expected one model file\n") + kUsage, 2);
  if (!parse_list(opt("-p", "--prefill", "512"), 0, &prefill)) return bad("-p", "--prefill", "512", "a list of token counts");
  if (!parse_list(opt("-n", "--generate", "128"), 0, &generate)) return bad("-n", "--generate", "128", "a list of token counts");
  if (!parse_list(opt("-d", "--depth", "0"), 0, &depth)) return bad("-d", "--depth", "0", "a list of token counts");
  if (!parse_list(opt("-t", "--threads", "1"), 0, &threads)) {
    return bad("-t", "--threads", "1", "a list of thread counts (0: the default)");
  }
  for (int64_t t : threads) {
    std::string error;
    if (!tern::cli::check_threads(args.has("-t") ? "-t" : "--threads", t, &error)) return fail(error, 2);
  }
  // 0 is the API's default (a pool of every hardware thread that runs a call only on free cores), passed as is.
  const std::string reps_text = opt("-r", "--repetitions", "5");
  char* end = nullptr;
  long reps = std::strtol(reps_text.c_str(), &end, 10);
  if (reps_text.empty() || *end != '\0' || reps < 1 || reps > 1000) return bad("-r", "--repetitions", "5", "1..1000");
  const std::string format = opt("-o", "--output", "md");
  if (format != "md" && format != "json" && format != "csv") return bad("-o", "--output", "md", "md, json or csv");
  const std::string backend_name = args.get("--backend", "cpu");
  tern_backend backend = backend_name == "cpu" ? TERN_BACKEND_CPU : backend_name == "auto" ? TERN_BACKEND_AUTO
                         : backend_name == "vulkan" ? TERN_BACKEND_VULKAN : tern_backend(-1);
  if (int(backend) < 0) return fail("--backend '" + backend_name + "': expected cpu, auto or vulkan", 2);
  const std::string device_text = args.get("--device", "-1");
  long device = std::strtol(device_text.c_str(), &end, 10);
  if (device_text.empty() || *end != '\0' || device < -1 || device > 1000000) return fail("--device '" + device_text + "': expected a device number from 0", 2);
  const std::string block_text = args.get("--row-block-rows", "0");
  const long long row_block_rows = std::strtoll(block_text.c_str(), &end, 10);
  if (block_text.empty() || *end != '\0' || row_block_rows < 0 || row_block_rows > (1LL << 40)) {
    return fail("--row-block-rows '" + block_text + "': expected a number of rows (0: each chain picks its own)", 2);
  }
  const int compete = int(args.get_int("--compete", 0, 0, 1024));
  const int sessions = int(args.get_int("--sessions", 0, 0, 1024));
  if (!args.ok()) return fail(args.error(), 2);
  if (sessions > 0 && (format != "md" || args.has("--compete") || args.has("--profile"))) {
    return fail("--sessions prints its own table: without -o json/csv, --compete or --profile", 2);
  }
  tern_session_options base;
  tern_session_options_init(&base);
  base.backend = backend;
  base.device = int(device + 1);
  base.row_block_rows = row_block_rows;
  base.weight_storage = args.has("--f16-weights") ? TERN_WEIGHT_STORAGE_F16 : TERN_WEIGHT_STORAGE_F32;
  base.activation_storage = args.has("--f16-activations") ? TERN_ACTIVATION_STORAGE_F16 : TERN_ACTIVATION_STORAGE_F32;
  base.kv_storage = args.has("--f16-kv") ? TERN_KV_STORAGE_F16 : TERN_KV_STORAGE_F32;

  const std::string path = args.positional()[0];
  tern::cli::Timer load_timer;
  tern_model* model = nullptr;
  if (tern_model_load(path.c_str(), &model) != TERN_OK) return fail(tern_last_error());
  const double load_ms = load_timer.seconds() * 1e3;
  tern_model_info info{};
  tern_model_get_info(model, &info);

  if (sessions > 0) {
    tern::bench::SessionsWork work{sessions, prefill[0], generate[0], int(reps)};
    tern::bench::SessionsTimes times;
    std::string error;
    std::fprintf(stderr, "tern-bench: %d sessions at once, pp%lld then tg%lld each\n", sessions,
                 (long long)work.prefill, (long long)work.generate);
    const bool ran = tern::bench::run_sessions(model, base, info.vocab_size, work, &times, &error);
    if (ran) tern::bench::print_sessions(work, times, path + " (" + info.description + ")");
    tern_model_free(model);
    return ran ? 0 : fail("--sessions " + std::to_string(sessions) + ": " + error);
  }
  std::vector<Test> tests;
  for (int64_t th : threads) {
    for (int64_t p : prefill) {
      if (p == 0) continue;
      Test t;
      t.name = "pp" + std::to_string(p);
      t.threads = int(th);
      t.prefill = t.n_tokens = p;
      tests.push_back(t);
    }
    for (int64_t n : generate) {
      if (n == 0) continue;
      for (int64_t d : depth) {
        Test t;
        t.name = "tg" + std::to_string(n) + (d > 0 ? "@d" + std::to_string(d) : "");
        t.threads = int(th);
        t.generate = t.n_tokens = n;
        t.depth = d;
        tests.push_back(t);
      }
    }
  }
  for (Test& t : tests) {
    std::string error;
    std::fprintf(stderr, "tern-bench: %s, %d thread(s)\n", t.name.c_str(), t.threads);
    bool ran = false;
    try {
      ran = run_test(model, base, info.vocab_size, info.max_context, int(reps), args.has("--profile"), &t, &error);
      if (ran && compete > 0 && t.skipped.empty()) {
        Test beside = t;  // the same test again, its results apart
        beside.ms.clear();
        beside.profile.clear();
        const std::vector<pid_t> busy = tern::bench::start_busy_processes(compete);
        ran = run_test(model, base, info.vocab_size, info.max_context, int(reps), false, &beside, &error);
        tern::bench::stop_busy_processes(busy);
        t.compete_ms = beside.ms;
      }
    } catch (const std::bad_alloc&) {
      error = "out of memory while setting the test up (its ids, logits or results)";
    }
    if (!ran) {
      tern_model_free(model);
      return fail(t.name + ": " + error);
    }
  }
  if (format == "md") {
    print_md(tests, path + " (" + info.description + ")", load_ms);
    if (compete > 0) print_compete(tests, compete);
    print_profile(tests);
  }
  else print_rows(tests, load_ms, format == "json");
  tern_model_free(model);
  return 0;
}
