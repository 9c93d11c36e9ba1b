// SPDX-License-Identifier: MIT
#include "modes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "npy.h"
#include "report.h"
#include "stream_score.h"
#include "format/temp_file.h"

namespace tern::run {
namespace {

using nlohmann::json;

// Prints a byte, escaping what would garble a terminal.
// A token's text on stdout: control characters other than newline and tab escaped (UTF-8 passes through).
void print_text(const std::string& text) {
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\n' || c == '\t' || (c >= 32 && c != 127)) std::fputc(c, stdout);
    else std::printf("\\x%02x", c);
  }
}

// -log p(target) in nats from a logits row [vocab].
double nll_of(const float* row, int64_t vocab, int32_t target) {
  const float mx = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - mx);
  return (std::log(sum) + mx) - double(row[target]);
}

// --logits-out: the .npy written to a temporary next to the destination, renamed into place when complete.
int write_logits(const std::string& path, const std::vector<float>& logits, int64_t n, int64_t vocab) {
  tern::TempFile out;
  const std::string header = npy::header_f32({n, vocab});
  Status st = out.create(path);
  if (st.ok()) st = out.write(header.data(), header.size());
  if (st.ok()) st = out.write(logits.data(), logits.size() * sizeof(float));
  if (st.ok()) st = out.commit();
  return st.ok() ? 0 : fail("--logits-out: " + st.message());
}

}  // namespace

int print_plan(Run& run) {
  // row chains / block rows: row-wise op chains run in blocks of that many rows (their inner values need only that).
  if (!run.opt.json) {
    std::printf("%s\n", run.session.context_note().c_str());  // what the state of every row is sized for
    std::printf("%10s %14s %14s %14s %14s %16s %10s %10s\n", "n", "weights", "packed", "arena", "state",
                "dense n x n", "row chains", "block rows");
  }
  json rows = json::array();
  uint64_t packed = 0;
  for (int64_t n : run.opt.plan_sizes) {
    tern_memory_plan p{};
    if (tern_session_plan(run.session.get(), n, &p) != TERN_OK)
      return fail("--plan " + std::to_string(n) + ": " + tern_last_error());
    rows.push_back({{"n", n},
                    {"weight_bytes", p.weight_bytes},
                    {"packed_weight_bytes", p.packed_weight_bytes},
                    {"arena_bytes", p.arena_bytes},
                    {"state_bytes", json_bytes(p.state_bytes)},
                    {"dense_attention_bytes", json_bytes(p.dense_attention_bytes)},
                    {"row_chains", p.row_chains},
                    {"row_block_rows", p.row_block_rows}});
    packed = p.packed_weight_bytes;
    if (run.opt.json) continue;
    auto bytes = [](uint64_t b) { return b == UINT64_MAX ? std::string(">= 2^64") : std::to_string(b); };
    std::printf("%10lld %14llu %14llu %14llu %14s %16s %10lld %10lld\n", static_cast<long long>(n),
                static_cast<unsigned long long>(p.weight_bytes), static_cast<unsigned long long>(p.packed_weight_bytes),
                static_cast<unsigned long long>(p.arena_bytes), bytes(p.state_bytes).c_str(),
                bytes(p.dense_attention_bytes).c_str(), static_cast<long long>(p.row_chains),
                static_cast<long long>(p.row_block_rows));
  }
  // The CPU packs float32 matrices once per model (its other sessions use the same copy); a Vulkan session uploads
  // its own.
  if (!run.opt.json && packed > 0 && run.session.backend().backend == TERN_BACKEND_CPU) {
    std::printf("packed weights: %s, shared by the model's sessions (one copy per model; each session's plan and "
                "memory budget count it)\n",
                tern::cli::format_bytes(packed).c_str());
  }
  run.report["plan"] = rows;
  return 0;
}

int generate(Run& run) {
  const Options& opt = run.opt;
  const std::vector<int32_t>& ids = opt.prompt_ids;  // text_inputs: never empty
  Error err;
  Sampler sampler = Sampler::create(opt.sampler, &err);
  if (err) return fail(err.message);
  Generator generator = Generator::create(run.session, opt.generator, &err);
  if (err) return fail(err.message);
  if (!opt.stops.empty()) {
    if (auto e = generator.set_stop_strings(opt.stops)) return fail("--stop: " + e.message);
  }

  if (!opt.json) {
    std::printf("%s", opt.prompt.c_str());
    std::fflush(stdout);
  }
  cli::Timer prompt_timer;
  int64_t kept = 0;
  if (auto e = generator.prompt(ids, &kept)) return fail("--prompt: " + e.message);
  const double prompt_s = prompt_timer.seconds();
  const int64_t limit = tern_session_sequence_limit(run.session.get());
  if (kept < int64_t(ids.size())) {
    std::fprintf(stderr, "tern-run: prompt: %zu tokens, context %lld: kept the last %lld\n", ids.size(),
                 static_cast<long long>(limit), static_cast<long long>(kept));
  }
  cli::Timer gen_timer;
  int64_t generated = 0;
  bool full = false;
  std::string text;
  std::vector<int32_t> out_ids;
  Utf8Stream utf8;
  // The generator stops at an end token (unless --ignore-eos), at a --stop text and after --tokens tokens.
  while (generated < opt.tokens && generator.stop_reason() == TERN_STOP_NONE) {
    int32_t next = -1;
    if (auto e = generator.next(sampler, &next)) {
      if (e.code != TERN_CONTEXT_FULL) return fail(e.message);
      full = true;
      break;
    }
    ++generated;
    out_ids.push_back(next);
    std::string piece;  // an end token is in "ids" but adds no text
    if (auto e = token_to_text(run.model, next, &piece)) return fail(e.message);
    text += piece;
    if (!opt.json) {
      print_text(utf8.push(piece));  // a byte token may carry half a character: held back until it is whole
      std::fflush(stdout);
    }
  }
  int64_t stop_index = -1;
  const tern_stop_reason reason = generator.stop_reason(&stop_index);
  const bool ended = reason == TERN_STOP_EOS;
  const char* reason_name = reason == TERN_STOP_EOS            ? "eos"
                            : reason == TERN_STOP_STRING       ? "stop_string"
                            : reason == TERN_STOP_LENGTH       ? "length"
                            : reason == TERN_STOP_CONTEXT_FULL ? "context_full"
                                                               : "none";
  const json stop_string = stop_index >= 0 ? json(opt.stops[size_t(stop_index)]) : json(nullptr);
  if (!opt.json) print_text(utf8.flush());
  const double gen_s = gen_timer.seconds();
  if (full) {
    std::fprintf(stderr, "tern-run: the context is full after %lld generated tokens (--context stop)\n",
                 static_cast<long long>(generated));
  }
  const tern_context_policy policy = opt.generator.context_policy;
  const bool slide = policy == TERN_CONTEXT_SLIDE || policy == TERN_CONTEXT_SHIFT;
  const int64_t keep = opt.generator.keep_tokens > 0 ? opt.generator.keep_tokens : std::max<int64_t>(1, limit / 2);
  const char* policy_name = policy == TERN_CONTEXT_STOP    ? "stop"
                            : policy == TERN_CONTEXT_SLIDE ? "slide"
                            : policy == TERN_CONTEXT_SHIFT ? "shift"
                                                           : "sinks";
  run.report["generate"] = {{"text", text},
                            {"ids", out_ids},
                            {"prompt_tokens", ids.size()},
                            {"prompt_tokens_kept", kept},
                            {"tokens_generated", generated},
                            {"context_policy", policy_name},
                            {"sink_tokens", opt.window > 0 ? json(opt.sinks) : json(nullptr)},
                            {"sink_window", opt.window > 0 ? json(opt.window) : json(nullptr)},
                            {"sequence_limit", limit},
                            {"keep_tokens", slide ? json(keep) : json(nullptr)},
                            {"refills", generator.slides()},
                            {"context_full", full},
                            {"ended_at_eos", ended},
                            {"stop_reason", reason_name},
                            {"stop_string", stop_string},
                            {"prompt_seconds", prompt_s},
                            {"generate_seconds", gen_s}};
  if (opt.json) return 0;
  std::printf("\n\n");
  std::printf("prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", ids.size(), prompt_s,
              double(std::max<size_t>(ids.size(), 1)) / prompt_s);
  std::printf("generated: %lld tokens in %.3f s (%.1f tokens/s", static_cast<long long>(generated), gen_s,
              double(generated) / gen_s);
  if (generator.slides() > 0) {
    std::printf(", %lld context %s keeping %lld tokens", static_cast<long long>(generator.slides()),
                policy == TERN_CONTEXT_SHIFT ? "shifts" : "refills", static_cast<long long>(keep));
  }
  if (ended) {
    std::printf("; ended at the end-of-sequence token)\n");
  } else if (stop_index >= 0) {
    std::printf("; stopped at --stop '%s')\n", opt.stops[size_t(stop_index)].c_str());
  } else {
    std::printf(")\n");
  }
  return 0;
}

int score(Run& run) {
  const Options& opt = run.opt;
  const std::string& text = opt.score_text;
  const int64_t n = int64_t(text.size());
  std::vector<int32_t> bytes(text.begin(), text.end());  // ids: byte + the tokenizer's offset (text_inputs)
  for (auto& b : bytes) b = int32_t(static_cast<unsigned char>(b)) + opt.score_byte_offset;
  json result = {{"file", opt.score_path}, {"bytes", n}};
  double bpb = 0, secs = 0;
  std::string how;
  if (opt.stream) {
    StreamScore sc;
    std::string error;
    if (!stream_score(run.session, bytes, opt.segment, nullptr, &sc, &error)) return fail("--score: " + error);
    bpb = sc.nll / std::log(2.0) / double(sc.predicted);
    secs = sc.seconds;
    result.update({{"mode", "streamed"}, {"segment", opt.segment}});
    how = "streamed in segments of " + std::to_string(opt.segment);
  } else {
    // Windows of the context; each after the first starts `stride` later and predicts the bytes past the previous
    // window's end (check_against_session: 1 <= stride < window), so every byte after the first is predicted once.
    const int64_t vocab = run.session.vocab_size(), window = std::min(run.context, n);
    const int64_t stride = opt.stride > 0 ? opt.stride : std::max<int64_t>(1, window / 2);
    std::vector<int32_t> ids(static_cast<size_t>(window));
    std::vector<float> logits;
    double nll = 0;         // nats
    int64_t scored_to = 1;  // next byte index to predict; byte 0 has no context
    cli::Timer timer;
    double last_report = 0;
    for (int64_t start = 0; scored_to < n; start += stride) {
      start = std::min(start, n - window);
      std::copy(bytes.begin() + start, bytes.begin() + start + window, ids.begin());
      if (auto err = run.session.forward(ids, &logits)) return fail("--score: " + err.message);
      for (int64_t i = scored_to - start - 1; i + 1 < window; ++i)  // logits row i predicts byte start+i+1
        nll += nll_of(logits.data() + i * vocab, vocab, ids[size_t(i + 1)]);
      scored_to = start + window;
      if (timer.seconds() - last_report >= 5.0) {
        last_report = timer.seconds();
        std::fprintf(stderr, "scoring: %lld / %lld bytes\n", static_cast<long long>(scored_to), static_cast<long long>(n));
      }
    }
    secs = timer.seconds();
    bpb = nll / std::log(2.0) / double(n - 1);
    result.update({{"mode", "windows"}, {"window", window}, {"stride", stride}});
    how = "window " + std::to_string(window) + ", stride " + std::to_string(stride);
  }
  result.update({{"bits_per_byte", bpb}, {"seconds", secs}});
  run.report["score"] = result;
  if (!opt.json) {
    std::printf("score: %s, %lld bytes, %s: %.4f bits per byte (%.0f bytes/s)\n", opt.score_path.c_str(),
                static_cast<long long>(n), how.c_str(), bpb, double(n - 1) / secs);
  }
  return 0;
}

int run_ids(Run& run) {
  const Options& opt = run.opt;
  const std::vector<int32_t>& ids = opt.ids;
  const int64_t vocab = run.session.vocab_size(), n = int64_t(ids.size());
  const bool keep_all = !opt.logits_path.empty() || (!opt.perplexity && opt.segment == 0);
  // [n, vocab] only where every row is kept (--logits-out, or one forward call); else a segment's rows at most.
  std::vector<float> logits(keep_all ? size_t(n * vocab) : 0);
  json result = {{"file", opt.ids_path}, {"n", n}};
  std::string error;
  cli::Timer timer;
  if (opt.perplexity) {
    StreamScore sc;
    if (!stream_score(run.session, ids, opt.segment, logits.empty() ? nullptr : logits.data(), &sc, &error))
      return fail("--ids: " + error);
    const double ppl = std::exp(sc.nll / double(sc.predicted)), bpt = sc.nll / std::log(2.0) / double(sc.predicted);
    result.update({{"segment", opt.segment}, {"perplexity", ppl}, {"bits_per_token", bpt}});
    if (!opt.json) {
      std::printf("perplexity: %s, %lld tokens, streamed in segments of %lld: %.4f (%.4f bits per token, %.1f tokens/s)\n",
                  opt.ids_path.c_str(), static_cast<long long>(n), static_cast<long long>(opt.segment), ppl, bpt,
                  double(n) / sc.seconds);
    }
  } else if (opt.segment > 0) {
    std::vector<float> part(keep_all ? 0 : size_t(std::min(opt.segment, n) * vocab));
    if (auto err = run.session.reset()) return fail(err.message);
    for (int64_t s = 0; s < n; s += opt.segment) {
      const int64_t len = std::min(opt.segment, n - s);
      float* rows = keep_all ? logits.data() + s * vocab : part.data();
      if (auto err = run.session.append(ids.data() + s, len, rows)) return fail("--ids: " + err.message);
    }
    result["segment"] = opt.segment;
  } else if (auto err = run.session.forward(ids, &logits)) {
    return fail("--ids: " + err.message);
  }
  const double secs = timer.seconds();
  result["seconds"] = secs;
  if (!opt.json) std::printf("ran %lld ids in %.3f s (%.1f tokens/s)\n", static_cast<long long>(n), secs, double(n) / secs);
  if (!opt.logits_path.empty()) {
    if (int rc = write_logits(opt.logits_path, logits, n, vocab)) return rc;
    result["logits_out"] = opt.logits_path;
    result["logits_shape"] = {n, vocab};
    if (!opt.json) {
      std::printf("logits [%lld, %lld] written to %s\n", static_cast<long long>(n), static_cast<long long>(vocab),
                  opt.logits_path.c_str());
    }
  }
  run.report["ids"] = result;
  return 0;
}

}  // namespace tern::run
