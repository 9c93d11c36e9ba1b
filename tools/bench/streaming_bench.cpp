// SPDX-License-Identifier: MIT
// Streaming a long sequence through a rotary model under a fixed cache budget (docs/streaming.md): how the four ways
// of making room compare in perplexity, speed and memory, and whether attention sinks hold their memory over a
// million generated tokens. A benchmark that prints numbers, not a test.
//
//   streaming_bench score MODEL.tern TEXT_OR_IDS --policy slide|window|sinks|shift [--budget 256] [--sinks 4]
//                   [--keep N] [--segment 10000] [--tokens N] [--per-line] [--threads 1] [--json out.json]
//   streaming_bench soak MODEL.tern [--tokens 1000000] [--sinks 4] [--window 252] [--threads 1] [--seed 1]
//                   [--direct] [--json out.json]
//   streaming_bench refill MODEL.tern [--max-tokens 1024] [--keep 512] [--refills 20] [--threads 1] [--json out.json]
//
// score feeds the sequence token by token through a tern_generator (the first token as the prompt, then
// tern_generator_append of one id at a time) and scores each next token with the log-softmax of
// tern_generator_logits. With a budget of B cached tokens:
//   slide   dense session of max_tokens B, TERN_CONTEXT_SLIDE keeping B/2 (a refill: reset and recompute them)
//   shift   the same session, TERN_CONTEXT_SHIFT keeping B/2 (the kept entries move and are re-rotated in place)
//   window  sink_tokens 0, sink_window B, TERN_CONTEXT_SINKS (the B most recent tokens, positions by cache index)
//   sinks   sink_tokens S, sink_window B - S, TERN_CONTEXT_SINKS (the first S tokens stay: StreamingLLM)
// TEXT_OR_IDS is a JSON list of ids (a file ending in .json) or a text file, tokenized with the model's tokenizer:
// whole, with the ids the tokenizer puts around a text (TERN_TOKENIZE_ADD_SPECIAL), or with --per-line one document
// a line, BOS + its ids + EOS, as examples/models/kjv-llama was trained; then a target that is BOS (the token after
// an EOS, which such a model never learns to predict) is fed but not scored.
//
// soak generates --tokens tokens (temperature 1, tern_sampler) through a sinks session and prints the resident set
// (VmRSS) and tokens/s after the first 10,000 tokens and every 100,000; at the end the peak (VmHWM) and whether it
// stays within 1% of the resident set after 10,000 tokens. Under SINKS the generator keeps the last 4096 tokens of its
// history (tern_generator_options.history_tokens); --direct feeds the session with tern_session_append instead.
//
// refill times the appends that make room under SLIDE and SHIFT (see refill() below).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "tern/tern.h"

namespace {

using nlohmann::json;

// A "VmRSS:" or "VmHWM:" line of /proc/self/status, in bytes; 0 where it is missing.
uint64_t proc_status_bytes(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) == 0) return std::stoull(line.substr(key.size())) * 1024;  // "  1234 kB"
  }
  return 0;
}

double mib(uint64_t bytes) { return double(bytes) / double(1 << 20); }

// -log softmax(logits)[target], in nats, in double precision.
double nll(const float* logits, int64_t vocab, int32_t target) {
  float top = logits[0];
  for (int64_t v = 1; v < vocab; ++v) top = std::max(top, logits[v]);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - double(top));
  return std::log(sum) + double(top) - double(logits[target]);
}

// Writes --json's file; false, with the error printed, when it cannot.
bool write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (out) return true;
  std::fprintf(stderr, "streaming_bench: cannot write '%s'\n", path.c_str());
  return false;
}

struct Loaded {
  tern_model* model = nullptr;
  tern_session* session = nullptr;
  tern_generator* generator = nullptr;
  ~Loaded() {
    tern_generator_free(generator);
    tern_session_free(session);
    tern_model_free(model);
  }
};

// Loads the model, creates the session and binds a generator; false with the message printed.
bool open(const std::string& path, const tern_session_options& so, const tern_generator_options& go, Loaded* out) {
  if (tern_model_load(path.c_str(), &out->model) != TERN_OK ||
      tern_session_create(out->model, &so, &out->session) != TERN_OK ||
      tern_generator_create(out->session, &go, &out->generator) != TERN_OK) {
    std::fprintf(stderr, "streaming_bench: %s\n", tern_last_error());
    return false;
  }
  return true;
}

// The ids to score: a JSON list, or text through the model's tokenizer (see the top of the file). --per-line stops
// after the line that reaches `enough` ids (0: every line) and counts the lines in *lines.
bool read_sequence(const tern_model* model, const std::string& path, bool per_line, int64_t enough,
                   std::vector<int32_t>* ids, int64_t* lines, std::string* error) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0)
    return tern::cli::read_ids_json(path, ids, error);
  std::string text;
  if (!tern::cli::read_file(path, uint64_t(1) << 30, "a text to score", &text, error)) return false;
  auto encode = [&](const std::string& s, uint32_t flags) {
    int64_t n = 0;
    if (tern_tokenize_with(model, s.data(), s.size(), flags, nullptr, 0, &n) != TERN_OK) return false;
    const size_t at = ids->size();
    ids->resize(at + size_t(n));
    return tern_tokenize_with(model, s.data(), s.size(), flags, ids->data() + at, n, &n) == TERN_OK;
  };
  if (!per_line) {
    if (!encode(text, TERN_TOKENIZE_ADD_SPECIAL)) *error = tern_last_error();
    return error->empty();
  }
  const int32_t bos = tern_model_special_token(model, TERN_TOKEN_BOS),
                eos = tern_model_special_token(model, TERN_TOKEN_EOS);
  if (bos < 0 || eos < 0) {
    *error = "--per-line needs a model with BOS and EOS tokens";
    return false;
  }
  for (size_t begin = 0; begin < text.size() && (enough == 0 || int64_t(ids->size()) < enough);) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (end > begin) {
      ids->push_back(bos);
      if (!encode(text.substr(begin, end - begin), 0)) {
        *error = tern_last_error();
        return false;
      }
      ids->push_back(eos);
      ++*lines;
    }
    begin = end + 1;
  }
  return true;
}

int score(tern::cli::Args& args) {
  const std::string policy = args.get("--policy");
  const int64_t budget = args.get_int("--budget", 256, 2, int64_t(1) << 30);
  const int64_t sinks = args.get_int("--sinks", 4, 0, budget - 1);
  const int64_t keep = args.get_int("--keep", budget / 2, 0, budget - 1);
  const int64_t segment = args.get_int("--segment", 10000, 1, int64_t(1) << 40);
  const int64_t max_tokens = args.get_int("--tokens", 0, 0, int64_t(1) << 40);
  const int64_t threads = args.get_int("--threads", 1, 0, 1024);
  std::string error;
  if (args.ok() && !tern::cli::check_threads("--threads", threads, &error)) {
    std::fprintf(stderr, "streaming_bench: %s\n", error.c_str());
    return 2;
  }
  if (!args.ok() || args.positional().size() != 3 ||
      (policy != "slide" && policy != "window" && policy != "sinks" && policy != "shift")) {
    std::fprintf(stderr, "streaming_bench score: %s\n",
                 !args.ok() ? args.error().c_str() : "needs MODEL.tern TEXT_OR_IDS --policy slide|window|sinks|shift");
    return 2;
  }
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = int(threads);
  tern_generator_options go;
  tern_generator_options_init(&go);
  if (policy == "slide" || policy == "shift") {
    so.max_tokens = budget;
    go.context_policy = policy == "slide" ? TERN_CONTEXT_SLIDE : TERN_CONTEXT_SHIFT;
    go.keep_tokens = keep;
  } else {
    so.sink_tokens = policy == "sinks" ? sinks : 0;
    so.sink_window = budget - so.sink_tokens;
    go.context_policy = TERN_CONTEXT_SINKS;
  }
  Loaded m;
  if (!open(args.positional()[1], so, go, &m)) return 1;
  std::vector<int32_t> ids;
  int64_t lines = 0;
  const bool per_line = args.has("--per-line");
  if (!read_sequence(m.model, args.positional()[2], per_line, max_tokens, &ids, &lines, &error)) {
    std::fprintf(stderr, "streaming_bench: %s\n", error.c_str());
    return 1;
  }
  if (max_tokens > 0 && int64_t(ids.size()) > max_tokens) ids.resize(size_t(max_tokens));
  if (ids.size() < 2) {
    std::fprintf(stderr, "streaming_bench: the sequence has %zu tokens; scoring needs at least 2\n", ids.size());
    return 1;
  }
  const int32_t bos = tern_model_special_token(m.model, TERN_TOKEN_BOS);
  std::printf("policy %s, budget %lld (sinks %lld, keep %lld), %zu tokens%s, %lld thread(s)\n", policy.c_str(),
              static_cast<long long>(budget), static_cast<long long>(so.sink_tokens), static_cast<long long>(keep),
              ids.size(), per_line ? (", " + std::to_string(lines) + " lines of documents").c_str() : "",
              static_cast<long long>(threads));
  std::printf("%10s %10s %10s %12s %14s\n", "tokens", "scored", "ppl", "tokens/s", "tokens/s all");

  json segments = json::array();
  double total_nll = 0, seg_nll = 0;
  int64_t total_scored = 0, seg_scored = 0, seg_begin = 1;
  tern::cli::Timer all;
  double seg_start = 0;
  auto fail = [&](const char* what, size_t t) {
    std::fprintf(stderr, "streaming_bench: %s at token %zu: %s\n", what, t, tern_generator_last_error(m.generator));
    return 1;
  };
  if (tern_generator_prompt(m.generator, ids.data(), 1, nullptr) != TERN_OK) return fail("prompt", 0);
  for (size_t t = 1; t < ids.size(); ++t) {
    if (!(per_line && ids[t] == bos)) {
      int64_t vocab = 0;
      const float* logits = tern_generator_logits(m.generator, &vocab);
      const double x = nll(logits, vocab, ids[t]);
      seg_nll += x;
      total_nll += x;
      ++seg_scored;
      ++total_scored;
    }
    if (tern_generator_append(m.generator, &ids[t], 1) != TERN_OK) return fail("append", t);
    const int64_t fed = int64_t(t) + 1;
    if (fed - seg_begin >= segment || t + 1 == ids.size()) {
      const double now = all.seconds();
      const double ppl = std::exp(seg_nll / double(std::max<int64_t>(seg_scored, 1)));
      const double rate = double(fed - seg_begin) / (now - seg_start), running = double(fed) / now;
      std::printf("%10lld %10lld %10.3f %12.1f %14.1f\n", static_cast<long long>(fed),
                  static_cast<long long>(seg_scored), ppl, rate, running);
      std::fflush(stdout);
      segments.push_back({{"end_token", fed},
                          {"scored", seg_scored},
                          {"mean_nll", seg_nll / double(seg_scored)},
                          {"perplexity", ppl},
                          {"tokens_per_s", rate},
                          {"running_tokens_per_s", running}});
      seg_begin = fed;
      seg_start = now;
      seg_nll = 0;
      seg_scored = 0;
    }
  }
  const double seconds = all.seconds();
  const double ppl = std::exp(total_nll / double(total_scored));
  const uint64_t peak = proc_status_bytes("VmHWM");
  const int64_t refills = tern_generator_slides(m.generator);
  std::printf(
      "\n%s: perplexity %.4f over %lld scored tokens (%.4f nats/token), %.1f tokens/s (%.1f s), peak RSS %.1f "
      "MiB, refills %lld\n",
      policy.c_str(), ppl, static_cast<long long>(total_scored), total_nll / double(total_scored),
      double(ids.size()) / seconds, seconds, mib(peak), static_cast<long long>(refills));
  if (args.has("--json")) {
    json j = {{"mode", "score"},
              {"policy", policy},
              {"model", args.positional()[1]},
              {"input", args.positional()[2]},
              {"budget", budget},
              {"sink_tokens", so.sink_tokens},
              {"sink_window", so.sink_window},
              {"max_tokens", so.max_tokens},
              {"keep_tokens", (policy == "slide" || policy == "shift") ? keep : 0},
              {"per_line", per_line},
              {"lines", lines},
              {"tokens", ids.size()},
              {"scored", total_scored},
              {"threads", threads},
              {"segment", segment},
              {"segments", segments},
              {"perplexity", ppl},
              {"mean_nll", total_nll / double(total_scored)},
              {"seconds", seconds},
              {"tokens_per_s", double(ids.size()) / seconds},
              {"peak_rss_bytes", peak},
              {"refills", refills},
              {"cpu", tern_cpu_description()},
              {"version", tern_version()}};
    if (!write_json(args.get("--json"), j)) return 1;
  }
  return 0;
}

int soak(tern::cli::Args& args) {
  const int64_t tokens = args.get_int("--tokens", 1000000, 1, int64_t(1) << 40);
  const int64_t sinks = args.get_int("--sinks", 4, 0, int64_t(1) << 30);
  const int64_t window = args.get_int("--window", 252, 1, int64_t(1) << 30);
  const int64_t threads = args.get_int("--threads", 1, 0, 1024);
  const int64_t seed = args.get_int("--seed", 1, 0, INT64_MAX);
  const bool direct = args.has("--direct");
  std::string error;
  if (args.ok() && !tern::cli::check_threads("--threads", threads, &error)) {
    std::fprintf(stderr, "streaming_bench: %s\n", error.c_str());
    return 2;
  }
  if (!args.ok() || args.positional().size() != 2) {
    std::fprintf(stderr, "streaming_bench soak: %s\n", !args.ok() ? args.error().c_str() : "needs MODEL.tern");
    return 2;
  }
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = int(threads);
  so.sink_tokens = sinks;
  so.sink_window = window;
  tern_generator_options go;
  tern_generator_options_init(&go);
  go.context_policy = TERN_CONTEXT_SINKS;
  Loaded m;
  if (!open(args.positional()[1], so, go, &m)) return 1;
  tern_sampler_options sampler_options;
  tern_sampler_options_init(&sampler_options);
  sampler_options.temperature = 1.0f;
  sampler_options.seed = uint64_t(seed);
  tern_sampler* sampler = nullptr;
  if (tern_sampler_create(&sampler_options, &sampler) != TERN_OK) {
    std::fprintf(stderr, "streaming_bench: %s\n", tern_last_error());
    return 1;
  }
  const int32_t bos = tern_model_special_token(m.model, TERN_TOKEN_BOS);
  const int32_t start = bos >= 0 ? bos : 0;
  std::printf("soak: %lld tokens, sinks %lld + window %lld, temperature 1, seed %lld, %lld thread(s), %s\n",
              static_cast<long long>(tokens), static_cast<long long>(sinks), static_cast<long long>(window),
              static_cast<long long>(seed), static_cast<long long>(threads),
              direct ? "tern_session_append (--direct)" : "tern_generator_next");
  std::printf("%10s %12s %12s %14s\n", "tokens", "RSS MiB", "tokens/s", "tokens/s all");
  json marks = json::array();
  tern::cli::Timer all;
  double last_time = 0;
  int64_t last_mark = 0;
  uint64_t rss_10k = 0;
  int rc = 0;
  if (tern_generator_prompt(m.generator, &start, 1, nullptr) != TERN_OK) {
    std::fprintf(stderr, "streaming_bench: %s\n", tern_generator_last_error(m.generator));
    rc = 1;
  }
  // --direct: the session alone, each sampled token appended with tern_session_append (no history kept).
  const int64_t vocab = tern_session_vocab_size(m.session);
  std::vector<float> logits(direct ? size_t(vocab) : 0);
  if (direct && rc == 0) std::copy_n(tern_generator_logits(m.generator, nullptr), vocab, logits.begin());
  for (int64_t t = 1; rc == 0 && t <= tokens; ++t) {
    int32_t token = -1;
    const bool ok = direct ? tern_sampler_sample(sampler, logits.data(), vocab, nullptr, 0, &token) == TERN_OK &&
                                 tern_session_append(m.session, &token, 1, logits.data()) == TERN_OK
                           : tern_generator_next(m.generator, sampler, &token) == TERN_OK;
    if (!ok) {
      std::fprintf(stderr, "streaming_bench: token %lld: %s\n", static_cast<long long>(t),
                   direct ? tern_session_last_error(m.session) : tern_generator_last_error(m.generator));
      rc = 1;
      break;
    }
    if (t == 10000 || t % 100000 == 0 || t == tokens) {
      const double now = all.seconds();
      const uint64_t rss = proc_status_bytes("VmRSS");
      if (t == 10000) rss_10k = rss;
      const double rate = double(t - last_mark) / (now - last_time);
      std::printf("%10lld %12.2f %12.1f %14.1f\n", static_cast<long long>(t), mib(rss), rate, double(t) / now);
      std::fflush(stdout);
      marks.push_back(
          {{"tokens", t}, {"rss_bytes", rss}, {"tokens_per_s", rate}, {"running_tokens_per_s", double(t) / now}});
      last_mark = t;
      last_time = now;
    }
  }
  tern_sampler_free(sampler);
  if (rc != 0) return rc;
  const double seconds = all.seconds();
  const uint64_t peak = proc_status_bytes("VmHWM");
  const double growth = rss_10k > 0 ? (double(peak) - double(rss_10k)) / double(rss_10k) : 0.0;
  const bool holds = rss_10k > 0 && growth <= 0.01;
  std::printf("\npeak RSS (VmHWM) %.2f MiB; %.1f tokens/s over %lld tokens (%.1f s)\n", mib(peak),
              double(tokens) / seconds, static_cast<long long>(tokens), seconds);
  if (rss_10k > 0) {
    std::printf("RSS after 10,000 tokens %.2f MiB: the peak is %+.2f%% of it, %s 1%%\n", mib(rss_10k), 100.0 * growth,
                holds ? "within" : "NOT within");
  } else {
    std::printf("fewer than 10,000 tokens: no RSS mark to compare the peak with\n");
  }
  if (args.has("--json")) {
    json j = {{"mode", "soak"},
              {"direct", direct},
              {"model", args.positional()[1]},
              {"tokens", tokens},
              {"sink_tokens", sinks},
              {"sink_window", window},
              {"seed", seed},
              {"threads", threads},
              {"marks", marks},
              {"rss_after_10000_bytes", rss_10k},
              {"peak_rss_bytes", peak},
              {"peak_over_rss_10000", growth},
              {"within_1_percent", holds},
              {"seconds", seconds},
              {"tokens_per_s", double(tokens) / seconds},
              {"cpu", tern_cpu_description()},
              {"version", tern_version()}};
    if (!write_json(args.get("--json"), j)) return 1;
  }
  return 0;
}

// refill: what making room costs under SLIDE (reset, then a prefill of the kept tokens) and SHIFT (the kept entries
// moved and their keys rotated in place), each in its own session of the same model, fed the same random ids one at
// a time, the two alternated token by token so that both see the same machine load.
int refill(tern::cli::Args& args) {
  const int64_t max_tokens = args.get_int("--max-tokens", 1024, 2, int64_t(1) << 30);
  const int64_t keep = args.get_int("--keep", max_tokens / 2, 1, int64_t(1) << 30);
  const int64_t refills = args.get_int("--refills", 20, 1, 1 << 20);
  const int64_t threads = args.get_int("--threads", 1, 0, 1024);
  std::string error;
  if (args.ok() && !tern::cli::check_threads("--threads", threads, &error)) {
    std::fprintf(stderr, "streaming_bench: %s\n", error.c_str());
    return 2;
  }
  if (!args.ok() || args.positional().size() != 2 || keep >= max_tokens) {
    std::fprintf(stderr, "streaming_bench refill: %s\n",
                 !args.ok() ? args.error().c_str()
                 : keep >= max_tokens ? "--keep must be less than --max-tokens"
                                      : "needs MODEL.tern");
    return 2;
  }
  tern_session_options so;
  tern_session_options_init(&so);
  so.threads = int(threads);
  so.max_tokens = max_tokens;
  const tern_context_policy policies[2] = {TERN_CONTEXT_SLIDE, TERN_CONTEXT_SHIFT};
  Loaded m[2];
  for (int p = 0; p < 2; ++p) {
    tern_generator_options go;
    tern_generator_options_init(&go);
    go.context_policy = policies[p];
    go.keep_tokens = keep;
    if (!open(args.positional()[1], so, go, &m[p])) return 1;
  }
  const int64_t vocab = tern_session_vocab_size(m[0].session);
  uint64_t state = 88172645463325252ull;  // xorshift64: the same ids for both
  auto next_id = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return int32_t(state % uint64_t(vocab));
  };
  std::vector<double> room[2], plain[2];  // seconds of appends that made room, and of the others
  const int32_t first = next_id();
  for (int p = 0; p < 2; ++p) {
    if (tern_generator_prompt(m[p].generator, &first, 1, nullptr) != TERN_OK) {
      std::fprintf(stderr, "streaming_bench: %s\n", tern_generator_last_error(m[p].generator));
      return 1;
    }
  }
  while (int64_t(room[0].size()) < refills || int64_t(room[1].size()) < refills) {
    const int32_t id = next_id();
    for (int p = 0; p < 2; ++p) {
      const int64_t before = tern_generator_slides(m[p].generator);
      tern::cli::Timer t;
      if (tern_generator_append(m[p].generator, &id, 1) != TERN_OK) {
        std::fprintf(stderr, "streaming_bench: %s\n", tern_generator_last_error(m[p].generator));
        return 1;
      }
      (tern_generator_slides(m[p].generator) > before ? room[p] : plain[p]).push_back(t.seconds());
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf("refill: max_tokens %lld, keep %lld, %lld thread(s); medians of %lld refills and of the other appends\n",
              static_cast<long long>(max_tokens), static_cast<long long>(keep), static_cast<long long>(threads),
              static_cast<long long>(refills));
  std::printf("%-8s %16s %16s\n", "policy", "refill ms", "other append ms");
  const char* names[2] = {"slide", "shift"};
  json rows = json::array();
  for (int p = 0; p < 2; ++p) {
    std::printf("%-8s %16.3f %16.3f\n", names[p], 1e3 * median(room[p]), 1e3 * median(plain[p]));
    rows.push_back({{"policy", names[p]},
                    {"refills", room[p].size()},
                    {"refill_ms_median", 1e3 * median(room[p])},
                    {"append_ms_median", 1e3 * median(plain[p])}});
  }
  std::printf("a shift costs %.1fx less than a slide's refill\n", median(room[0]) / std::max(median(room[1]), 1e-12));
  if (args.has("--json")) {
    json j = {{"mode", "refill"},      {"model", args.positional()[1]}, {"max_tokens", max_tokens},
              {"keep", keep},          {"threads", threads},            {"policies", rows},
              {"cpu", tern_cpu_description()}, {"version", tern_version()}};
    if (!write_json(args.get("--json"), j)) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv,
                       {"--policy", "--budget", "--sinks", "--keep", "--segment", "--tokens", "--threads", "--json",
                        "--window", "--seed", "--max-tokens", "--refills"},
                       {"--per-line", "--direct", "-h", "--help"});
  const std::string mode = args.positional().empty() ? "" : args.positional()[0];
  if (args.has("-h") || args.has("--help") || (mode != "score" && mode != "soak" && mode != "refill")) {
    std::fprintf(
        stderr,
        "usage: streaming_bench score MODEL.tern TEXT_OR_IDS --policy slide|window|sinks|shift [--budget 256]\n"
        "                       [--sinks 4] [--keep N] [--segment 10000] [--tokens N] [--per-line]\n"
        "                       [--threads 1] [--json out.json]\n"
        "       streaming_bench soak MODEL.tern [--tokens 1000000] [--sinks 4] [--window 252] [--threads 1]\n"
        "                       [--seed 1] [--direct] [--json out.json]\n"
        "       streaming_bench refill MODEL.tern [--max-tokens 1024] [--keep 512] [--refills 20] [--threads 1]\n"
        "                       [--json out.json]\n");
    return args.has("-h") || args.has("--help") ? 0 : 2;
  }
  return mode == "score" ? score(args) : mode == "soak" ? soak(args) : refill(args);
}
