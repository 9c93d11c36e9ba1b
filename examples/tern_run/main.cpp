// tern-run: generate text from a prompt, score a file in bits per byte, or dump logits for given ids.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "npy.h"
#include "stream_score.h"
#include "tern/tern.hpp"

namespace {

const char* kUsage = R"(usage: tern-run MODEL.tern [options]

Runs a converted model on the CPU or on a Vulkan device. One or more of:
  --prompt TEXT         generate text after TEXT (byte-level models)
  --score FILE          bits per byte of FILE: streamed through the state (Transformer-XL's memory, ...) with
                        --segment, and by default for models without a context limit; otherwise in windows of
                        the model's context
  --ids FILE            run the token ids in FILE (a JSON array) ...
  --logits-out FILE     ... and write their logits as a float32 .npy array [n, vocab]
  --perplexity          ... and report their perplexity, streamed through the state (any vocabulary)
  --plan N[,N...]       print the planner's memory numbers for calls of N tokens

Generation (the library's sampler and generator; README, "Generation"):
  -n, --tokens N        tokens to generate (default 200)
  --temperature T       0 for greedy decoding (default 0.7)
  --top-k K             sample among the K most likely tokens, 0 for all (default 40)
  --top-p P             then keep the fewest most likely tokens holding P of the probability, 1 for all (default 1)
  --min-p P             then keep the tokens at least P times as likely as the most likely one, 0 for all (default 0)
  --repeat-penalty R    divide positive logits (multiply negative ones) of tokens seen recently by R, 1: off
                        (default 1)
  --repeat-last-n N     tokens of the history the penalty looks at, 0 for all (default 64)
  --seed S              random seed; the same seed gives the same text on every platform (default 1)
  --context stop|slide  when the sequence reaches the session's limit: stop, or keep the last --keep tokens,
                        feed them again and go on (default slide). Models whose state is bounded (windows,
                        memories, sinusoidal positions) have no such limit and never refill
  --keep N              tokens --context slide keeps (default: half the context)
Scoring and logits:
  --stride S            score window stride in tokens (default: half the window)
  --segment N           feed --ids, --score and --perplexity through the streaming state N tokens at a time
                        (default for streamed scoring: 128)
Session:
  --threads N           CPU threads (default 0: every hardware thread)
  --max-tokens N        tokens the session holds (default: the model's context)
  --max-batch N         most tokens in one call (default: max-tokens, capped at the model's context)
  --memory-budget BYTES fail at load unless the session fits in BYTES (default: no budget)
  --backend B           cpu | vulkan | auto (default cpu). vulkan: every op as a compute shader on a Vulkan
                        device (fails, naming the op, for a model with ops that have no shader yet); auto: a
                        Vulkan GPU when there is one and the model runs there, else the CPU, with a notice
  --device N            Vulkan device N as vulkaninfo numbers them (GPU0 is 0; default: the best device)
  --f16-weights         Vulkan: store LINEAR weights and EMBEDDING tables as float16 on the device (half their
                        memory; compute stays float32: only the weights' rounding differs); needs a device with
                        storageBuffer16BitAccess. With --backend cpu: an error; auto on the CPU: float32
  --f16-activations     CPU: store the whole-sequence values kept between row blocks (Reformer's residual
                        streams around LSH layers) as float16: half their memory, results change at ~1e-3.
                        With --backend vulkan: an error; auto on Vulkan: float32
  --version             versions (tool, library, .tern formats) and build
  -h, --help            this text
)";

struct Options {
  std::string model_path, prompt, score_path, ids_path, logits_path, plan;
  bool has_prompt = false;
  bool perplexity = false;  // --ids scored through the state
  bool stream = false;      // scoring streams through the state (--segment, or a model without a context limit)
  int64_t tokens = 200, stride = 0, segment = 0, threads = 0, max_tokens = 0, max_batch = 0;
  int64_t memory_budget = 0;
  tern_sampler_options sampler;         // --temperature, --top-k, --top-p, --min-p, --repeat-*, --seed
  tern_generator_options generator;     // --context, --keep
  tern_backend backend = TERN_BACKEND_CPU;
  int64_t device = -1;  // vulkaninfo's numbering; -1: the best device
};

int fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "tern-run: error: %s\n", message.c_str());
  return code;
}

// Prints a byte, escaping what would garble a terminal.
void print_byte(int32_t id) {
  if (id >= 256) return;
  unsigned char c = static_cast<unsigned char>(id);
  if (c == '\n' || c == '\t' || (c >= 32 && c != 127)) std::fputc(c, stdout);
  else std::printf("\\x%02x", c);
}

int generate(const tern::ModelHandle& model, tern::SessionHandle& session, const Options& opt) {
  std::vector<int32_t> ids;
  if (auto err = tern::tokenize(model, opt.prompt, &ids)) return fail(err.message);
  if (ids.empty()) ids.push_back('\n');
  tern::Error err;
  tern::Sampler sampler = tern::Sampler::create(opt.sampler, &err);
  if (err) return fail(err.message);
  tern::Generator generator = tern::Generator::create(session, opt.generator, &err);
  if (err) return fail(err.message);

  std::printf("%s", opt.prompt.c_str());
  std::fflush(stdout);
  tern::cli::Timer prompt_timer;
  int64_t kept = 0;
  if (auto e = generator.prompt(ids, &kept)) return fail(e.message);
  const double prompt_s = prompt_timer.seconds();
  if (kept < int64_t(ids.size())) {
    std::fprintf(stderr, "tern-run: the prompt has %zu tokens and the context holds %lld: kept the last %lld\n",
                 ids.size(), static_cast<long long>(tern_session_sequence_limit(session.get())),
                 static_cast<long long>(kept));
  }
  tern::cli::Timer gen_timer;
  int64_t generated = 0;
  bool full = false;
  for (; generated < opt.tokens; ++generated) {
    int32_t next = -1;
    if (auto e = generator.next(sampler, &next)) {
      if (e.code != TERN_CONTEXT_FULL) return fail(e.message);
      full = true;
      break;
    }
    print_byte(next);
    std::fflush(stdout);
  }
  const double gen_s = gen_timer.seconds();
  std::printf("\n\n");
  if (full) {
    std::fprintf(stderr, "tern-run: the context is full after %lld generated tokens (--context stop)\n",
                 static_cast<long long>(generated));
  }
  std::printf("prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", opt.prompt.size(), prompt_s,
              double(std::max<size_t>(opt.prompt.size(), 1)) / prompt_s);
  std::printf("generated: %lld tokens in %.3f s (%.1f tokens/s%s)\n", static_cast<long long>(generated), gen_s,
              double(generated) / gen_s, generator.slides() ? ", with context refills" : "");
  return 0;
}

int score(tern::SessionHandle& session, const Options& opt, int64_t context) {
  std::string text, error;
  if (!tern::cli::read_file(opt.score_path, &text, &error)) return fail(error);
  if (text.size() < 2) return fail(opt.score_path + ": need at least 2 bytes to score");
  if (opt.stream) {
    std::vector<int32_t> bytes(text.begin(), text.end());
    for (auto& b : bytes) b = int32_t(static_cast<unsigned char>(b));
    tern::run::StreamScore sc;
    if (!tern::run::stream_score(session, bytes, opt.segment, nullptr, &sc, &error)) return fail(error);
    std::printf("score: %s, %lld bytes, streamed in segments of %lld: %.4f bits per byte (%.0f bytes/s)\n",
                opt.score_path.c_str(), static_cast<long long>(text.size()), static_cast<long long>(opt.segment),
                sc.nll / std::log(2.0) / double(sc.predicted), double(text.size()) / sc.seconds);
    return 0;
  }
  const int64_t n = int64_t(text.size()), vocab = session.vocab_size();
  const int64_t window = std::min(context, n);
  const int64_t stride = opt.stride > 0 ? std::min(opt.stride, window) : std::max<int64_t>(1, window / 2);
  std::vector<int32_t> ids(static_cast<size_t>(window));
  std::vector<float> logits;
  double nll = 0;       // nats
  int64_t scored_to = 1;  // next byte index to predict; byte 0 has no context
  tern::cli::Timer timer;
  int64_t last_report = 0;
  for (int64_t start = 0; scored_to < n; start += stride) {
    start = std::min(start, n - window);
    for (int64_t i = 0; i < window; ++i) ids[i] = int32_t(static_cast<unsigned char>(text[start + i]));
    if (auto err = session.forward(ids, &logits)) return fail(err.message);
    for (int64_t i = scored_to - start - 1; i + 1 < window; ++i) {  // logits row i predicts byte start+i+1
      const float* row = logits.data() + i * vocab;
      float mx = *std::max_element(row, row + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
      nll += (std::log(sum) + mx) - row[ids[i + 1]];
    }
    scored_to = start + window;
    if (timer.seconds() - double(last_report) >= 5.0) {
      last_report = int64_t(timer.seconds());
      std::fprintf(stderr, "scoring: %lld / %lld bytes\n", static_cast<long long>(scored_to), static_cast<long long>(n));
    }
  }
  double secs = timer.seconds();
  double bpb = nll / std::log(2.0) / double(n - 1);
  std::printf("score: %s, %lld bytes, window %lld, stride %lld: %.4f bits per byte (%.0f bytes/s)\n",
              opt.score_path.c_str(), static_cast<long long>(n), static_cast<long long>(window),
              static_cast<long long>(stride), bpb, double(n - 1) / secs);
  return 0;
}

int run_ids(tern::SessionHandle& session, const Options& opt) {
  std::vector<int32_t> ids;
  std::string error;
  if (!tern::cli::read_ids_json(opt.ids_path, &ids, &error)) return fail(error);
  if (ids.empty()) return fail(opt.ids_path + ": no token ids");
  const int64_t vocab = session.vocab_size(), n = int64_t(ids.size());
  // Perplexity needs no [n, vocab] buffer unless the logits are written out.
  std::vector<float> logits(opt.perplexity && opt.logits_path.empty() ? 0 : static_cast<size_t>(n * vocab));
  tern::cli::Timer timer;
  if (opt.perplexity) {
    tern::run::StreamScore sc;
    if (!tern::run::stream_score(session, ids, opt.segment, logits.empty() ? nullptr : logits.data(), &sc, &error))
      return fail(error);
    std::printf("perplexity: %s, %lld tokens, streamed in segments of %lld: %.4f (%.4f bits per token, %.1f tokens/s)\n",
                opt.ids_path.c_str(), static_cast<long long>(n), static_cast<long long>(opt.segment),
                std::exp(sc.nll / double(sc.predicted)), sc.nll / std::log(2.0) / double(sc.predicted),
                double(n) / sc.seconds);
  } else if (opt.segment > 0) {
    if (auto err = session.reset()) return fail(err.message);
    for (int64_t s = 0; s < n; s += opt.segment) {
      int64_t len = std::min(opt.segment, n - s);
      if (auto err = session.append(ids.data() + s, len, logits.data() + s * vocab)) return fail(err.message);
    }
  } else if (auto err = session.forward(ids, &logits)) {
    return fail(err.message);
  }
  double secs = timer.seconds();
  std::printf("ran %lld ids in %.3f s (%.1f tokens/s)\n", static_cast<long long>(n), secs, double(n) / secs);
  if (!opt.logits_path.empty()) {
    if (!tern::npy::write_f32(opt.logits_path, logits.data(), {n, vocab}, &error)) return fail(error);
    std::printf("logits [%lld, %lld] written to %s\n", static_cast<long long>(n), static_cast<long long>(vocab),
                opt.logits_path.c_str());
  }
  return 0;
}

int print_plan(tern::SessionHandle& session, const std::string& list) {
  // row chains / block rows: row-wise op chains run in blocks of that many rows (their inner values need only that).
  std::printf("%10s %14s %14s %14s %14s %16s %10s %10s\n", "n", "weights", "packed", "arena", "state", "dense n x n",
              "row chains", "block rows");
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long n = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1) return fail("--plan: '" + item + "' is not a positive integer", 2);
    tern_memory_plan p = session.plan(n);
    std::printf("%10lld %14llu %14llu %14llu %14llu %16llu %10lld %10lld\n", n,
                static_cast<unsigned long long>(p.weight_bytes), static_cast<unsigned long long>(p.packed_weight_bytes),
                static_cast<unsigned long long>(p.arena_bytes), static_cast<unsigned long long>(p.state_bytes),
                static_cast<unsigned long long>(p.dense_attention_bytes), static_cast<long long>(p.row_chains),
                static_cast<long long>(p.row_block_rows));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv,
                       {"--prompt", "--score", "--ids", "--logits-out", "--plan", "-n", "--tokens", "--temperature",
                        "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed", "--context",
                        "--keep", "--stride", "--segment", "--threads", "--max-tokens", "--max-batch", "--backend",
                        "--memory-budget", "--device"},
                       {"-h", "--help", "--version", "--perplexity", "--f16-weights", "--f16-activations"});
  if (args.has("-h") || args.has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.has("--version")) {
    tern::cli::print_version("tern-run");
    return 0;
  }
  Options opt;
  opt.tokens = args.get_int(args.has("-n") ? "-n" : "--tokens", 200, 0, 1 << 24);
  tern_sampler_options_init(&opt.sampler);
  opt.sampler.temperature = float(args.get_double("--temperature", 0.7, 0.0, 100.0));
  opt.sampler.top_k = int32_t(args.get_int("--top-k", 40, 0, INT32_MAX));
  opt.sampler.top_p = float(args.get_double("--top-p", 1.0, 1e-9, 1.0));
  opt.sampler.min_p = float(args.get_double("--min-p", 0.0, 0.0, 1.0));
  opt.sampler.repetition_penalty = float(args.get_double("--repeat-penalty", 1.0, 1e-6, 1e6));
  opt.sampler.repetition_last_n = int32_t(args.get_int("--repeat-last-n", 64, 0, INT32_MAX));
  opt.sampler.seed = uint64_t(args.get_int("--seed", 1, 0, INT64_MAX));
  tern_generator_options_init(&opt.generator);
  opt.generator.keep_tokens = args.get_int("--keep", 0, 1, INT64_MAX);
  opt.stride = args.get_int("--stride", 0, 1, 1 << 30);
  opt.segment = args.get_int("--segment", 0, 1, 1 << 30);
  opt.threads = args.get_int("--threads", 0, 0, 1024);  // 0: every hardware thread, as in the API
  opt.max_tokens = args.get_int("--max-tokens", 0, 1, int64_t(1) << 31);
  opt.max_batch = args.get_int("--max-batch", 0, 1, int64_t(1) << 31);
  opt.memory_budget = args.get_int("--memory-budget", 0, 1, INT64_MAX);
  opt.device = args.get_int("--device", -1, 0, 1 << 20);
  if (!args.ok()) return fail(args.error() + "\n" + kUsage, 2);
  if (args.positional().size() != 1) return fail(std::string("expected one model file\n") + kUsage, 2);
  opt.model_path = args.positional()[0];
  opt.has_prompt = args.has("--prompt");
  opt.prompt = args.get("--prompt");
  opt.score_path = args.get("--score");
  opt.ids_path = args.get("--ids");
  opt.logits_path = args.get("--logits-out");
  opt.plan = args.get("--plan");
  opt.perplexity = args.has("--perplexity");
  if (opt.perplexity && opt.ids_path.empty()) return fail("--perplexity needs --ids", 2);
  std::string backend = args.get("--backend", "cpu");
  if (backend == "cpu") opt.backend = TERN_BACKEND_CPU;
  else if (backend == "auto") opt.backend = TERN_BACKEND_AUTO;
  else if (backend == "vulkan") opt.backend = TERN_BACKEND_VULKAN;
  else return fail("--backend must be cpu, auto or vulkan, got '" + backend + "'", 2);
  const std::string context_policy = args.get("--context", "slide");
  if (context_policy == "stop") opt.generator.context_policy = TERN_CONTEXT_STOP;
  else if (context_policy == "slide") opt.generator.context_policy = TERN_CONTEXT_SLIDE;
  else return fail("--context must be stop or slide, got '" + context_policy + "'", 2);
  if (!opt.logits_path.empty() && opt.ids_path.empty()) return fail("--logits-out needs --ids", 2);
  if (!opt.has_prompt && opt.score_path.empty() && opt.ids_path.empty() && opt.plan.empty()) {
    return fail(std::string("nothing to do: give --prompt, --score, --ids or --plan\n") + kUsage, 2);
  }

  tern::cli::Timer load_timer;
  tern::Error err;
  tern::ModelHandle model = tern::ModelHandle::load(opt.model_path, &err);
  if (err) return fail(err.message);
  tern_model_info info = model.info();
  // Streamed scoring holds the whole stream in the session (a bounded state stays bounded) and calls of --segment.
  opt.stream = opt.perplexity || (!opt.score_path.empty() && (opt.segment > 0 || info.max_context == 0));
  if (opt.stream && opt.segment == 0) opt.segment = 128;
  const int64_t stream_tokens = opt.stream ? tern::run::count_tokens(opt.score_path, opt.ids_path) : 0;
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = opt.backend;
  so.threads = int(opt.threads);
  so.max_tokens = opt.max_tokens;
  so.max_batch = opt.max_batch;
  if (opt.stream && opt.max_tokens == 0) so.max_tokens = std::max(stream_tokens, info.max_context);
  if (opt.stream && opt.max_batch == 0) so.max_batch = opt.segment;
  so.memory_budget_bytes = uint64_t(opt.memory_budget);
  so.device = int(opt.device + 1);  // the API counts from 1, 0 being "the best"
  so.weight_storage = args.has("--f16-weights") ? TERN_WEIGHT_STORAGE_F16 : TERN_WEIGHT_STORAGE_F32;
  so.activation_storage = args.has("--f16-activations") ? TERN_ACTIVATION_STORAGE_F16 : TERN_ACTIVATION_STORAGE_F32;
  tern::SessionHandle session = tern::SessionHandle::create(model, so, &err);
  if (err) return fail(err.message);
  const tern_backend_info where = session.backend();
  if (where.backend == TERN_BACKEND_VULKAN) {
    std::fprintf(stderr, "backend: vulkan, device: %s (%s), driver: %s, weights: %s\n", where.device_name,
                 where.device_type, where.driver, so.weight_storage == TERN_WEIGHT_STORAGE_F16 ? "float16 storage" : "float32");
  } else {
    std::fprintf(stderr, "backend: cpu, %s%s\n", where.driver,
                 so.activation_storage == TERN_ACTIVATION_STORAGE_F16 ? ", activations between row blocks: float16" : "");
  }
  const int64_t context = opt.max_tokens > 0 ? opt.max_tokens : info.max_context;
  std::fprintf(stderr, "model: %s (%s), context %lld, loaded in %.3f s\n", opt.model_path.c_str(), info.description,
               static_cast<long long>(context), load_timer.seconds());
  if (opt.has_prompt && !info.vocab_is_bytes) return fail("--prompt needs a byte-level model; use --ids");
  if (!opt.score_path.empty() && !info.vocab_is_bytes) return fail("--score needs a byte-level model");

  int rc = 0;
  if (!opt.plan.empty()) rc = print_plan(session, opt.plan);
  if (rc == 0 && opt.has_prompt) rc = generate(model, session, opt);
  if (rc == 0 && !opt.score_path.empty()) rc = score(session, opt, context);
  if (rc == 0 && !opt.ids_path.empty()) rc = run_ids(session, opt);
  std::printf("peak memory: %s\n", tern::cli::format_bytes(tern::cli::peak_rss_bytes()).c_str());
  return rc;
}
