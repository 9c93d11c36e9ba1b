// SPDX-License-Identifier: MIT
// tern-run's whole command: the command line and every path are checked before the model loads (options.cpp), the
// option grid against the model and its session before any mode runs (checks.cpp); the modes are in modes.cpp.
// main.cpp calls it; so does the fuzz target of the command line (tests/fuzz/fuzz_tern_run.cpp).
#include "run.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "modes.h"
#include "options.h"
#include "report.h"
#include "tern/tern.hpp"

namespace tern::run {
namespace {

int run_all(Options& opt) {
  tern::cli::Timer load_timer;
  tern::Error err;
  tern::ModelHandle model = tern::ModelHandle::load(opt.model_path, &err);
  if (err) return fail(err.message);
  const tern_model_info info = model.info();
  std::string text_error;
  if (!text_inputs(opt, model, &text_error)) return fail(text_error);
  // A model that records its evaluation's tokens per call (a memory: its outputs depend on how a stream is cut into
  // calls) gets its --ids and --score fed in calls of that length unless --segment (or --stride's windows) says
  // otherwise; within --max-batch and --max-tokens where those are given.
  const int64_t model_segment = model.segment_length();
  const bool segment_from_model = opt.segment == 0 && model_segment > 0 && opt.stride == 0 &&
                                  (!opt.ids.empty() || !opt.score_path.empty());
  if (segment_from_model) {
    opt.segment = model_segment;
    if (opt.max_batch > 0) opt.segment = std::min(opt.segment, opt.max_batch);
    if (opt.max_tokens > 0) opt.segment = std::min(opt.segment, opt.max_tokens);
  }
  // Streamed scoring holds the whole stream in the session (a bounded state stays bounded) and calls of --segment.
  opt.stream = opt.perplexity || (!opt.score_path.empty() && (opt.segment > 0 || info.max_context == 0));
  if (opt.stream && opt.segment == 0) opt.segment = 128;
  const int64_t stream_tokens = opt.stream ? int64_t(std::max(opt.score_text.size(), opt.ids.size())) : 0;
  tern_session_options so;
  tern_session_options_init(&so);
  so.backend = opt.backend;
  so.threads = int(opt.threads);
  so.max_tokens = opt.max_tokens;
  so.max_batch = opt.max_batch;
  if (opt.stream && opt.max_tokens == 0) so.max_tokens = std::max(stream_tokens, info.max_context);
  if (opt.stream && opt.max_batch == 0) so.max_batch = std::min(opt.segment, std::max<int64_t>(so.max_tokens, 1));
  // --ids alone makes calls of all its ids, or of --segment of them: the session is sized to those calls, not to
  // the context (an XL model's position tables and the arena grow with max_batch: 50 ids under --max-tokens
  // 20000000 would otherwise plan 18 GiB). Ids past the context are refused by check_against_session.
  const bool ids_only = !opt.ids.empty() && !opt.has_prompt && opt.score_path.empty() && opt.plan_sizes.empty();
  // Without a context limit the session holds what --ids brings (the state of a bounded kind stays bounded).
  if (ids_only && info.max_context == 0 && opt.max_tokens == 0) so.max_tokens = int64_t(opt.ids.size());
  if (ids_only && !opt.stream && opt.max_batch == 0) {
    const int64_t calls = opt.segment > 0 ? std::min(opt.segment, int64_t(opt.ids.size())) : int64_t(opt.ids.size());
    const int64_t context = so.max_tokens > 0 ? so.max_tokens : info.max_context;
    so.max_batch = context > 0 ? std::min(calls, context) : calls;
  }
  // A prompt on a model without a context limit: a session for the prompt and the tokens asked for (a bounded state
  // continues past it), prefilled in calls of the model's segment where it records one.
  if (opt.has_prompt && info.max_context == 0 && opt.max_tokens == 0 && !opt.stream) {
    so.max_tokens = std::max<int64_t>(so.max_tokens, int64_t(opt.prompt_ids.size()) + opt.tokens);
    if (opt.max_batch == 0) {
      const int64_t prompt = std::max<int64_t>(1, int64_t(opt.prompt_ids.size()));
      so.max_batch = std::max(so.max_batch, model_segment > 0 ? std::min(prompt, model_segment) : prompt);
    }
  }
  so.sink_tokens = opt.sinks;
  so.sink_window = opt.window;
  // With sinks a prompt longer than the state runs whole, as the reference does, before the cut.
  if (opt.window > 0 && opt.max_batch == 0 && int64_t(opt.prompt_ids.size()) > opt.sinks + opt.window) {
    so.max_batch = int64_t(opt.prompt_ids.size());
  }
  so.memory_budget_bytes = uint64_t(opt.memory_budget);
  so.device = int(opt.device + 1);  // the API counts from 1, 0 being "the best"
  so.weight_storage = opt.f16_weights ? TERN_WEIGHT_STORAGE_F16 : TERN_WEIGHT_STORAGE_F32;
  so.activation_storage = opt.f16_activations ? TERN_ACTIVATION_STORAGE_F16 : TERN_ACTIVATION_STORAGE_F32;
  so.kv_storage = opt.f16_kv ? TERN_KV_STORAGE_F16 : TERN_KV_STORAGE_F32;
  // Nothing here continues a sequence when every call is a forward: --score in windows, --ids in one call, --plan.
  // State only a later call would read (a Reformer LSH layer's generation cache) is then not kept.
  so.forward_only = !opt.has_prompt && !opt.stream && opt.segment == 0 ? 1 : 0;
  tern::SessionHandle session = tern::SessionHandle::create(model, so, &err);
  if (err) return fail(session_error_with_flags(opt, err.message));
  std::string error;
  if (!check_against_session(opt, info, session, &error)) return fail(error);
  const tern_backend_info where = session.backend();
  const bool vulkan = where.backend == TERN_BACKEND_VULKAN;
  const bool f16_weights = vulkan && so.weight_storage == TERN_WEIGHT_STORAGE_F16;
  const bool f16_activations = !vulkan && so.activation_storage == TERN_ACTIVATION_STORAGE_F16;
  const bool f16_kv = !vulkan && so.kv_storage == TERN_KV_STORAGE_F16;
  if (vulkan) {
    std::fprintf(stderr, "backend: vulkan, device: %s (%s), driver: %s, weights: %s\n", where.device_name,
                 where.device_type, where.driver, f16_weights ? "float16 storage" : "float32");
  } else {
    std::fprintf(stderr, "backend: cpu, %s%s%s\n", where.driver,
                 f16_activations ? ", activations between row blocks: float16" : "",
                 f16_kv ? ", attention keys and values: float16" : "");
  }
  std::fprintf(stderr, "context: %s\n", session.context_note().c_str());
  const int64_t context = opt.max_tokens > 0 ? opt.max_tokens : info.max_context;
  const double load_s = load_timer.seconds();
  std::fprintf(stderr, "model: %s (%s), context %lld, loaded in %.3f s\n", opt.model_path.c_str(), info.description,
               static_cast<long long>(context), load_s);
  if (segment_from_model) {
    std::fprintf(stderr, "segment: %lld tokens per call, the model's evaluation segment (--segment N feeds N)\n",
                 static_cast<long long>(opt.segment));
  }

  nlohmann::json report = {
      {"model", opt.model_path},
      {"description", info.description},
      {"tokenizer", tern_model_tokenizer(model.get())},
      {"context", context},
      {"context_note", session.context_note()},
      {"backend",
       {{"name", vulkan ? "vulkan" : "cpu"},
        {"device", where.device_name},
        {"device_type", where.device_type},
        {"driver", where.driver},
        {"weights", f16_weights ? "f16" : "f32"},
        {"activations", f16_activations ? "f16" : "f32"},
        {"kv", f16_kv ? "f16" : "f32"}}},
      {"threads", opt.threads > 0 ? opt.threads : tern::cli::hardware_threads()},
      {"load_seconds", load_s}};
  Run run{opt, model, session, context, report};
  int rc = 0;
  if (!opt.plan_sizes.empty()) rc = print_plan(run);
  if (rc == 0 && opt.has_prompt) rc = generate(run);
  if (rc == 0 && !opt.score_path.empty()) rc = score(run);
  if (rc == 0 && !opt.ids_path.empty()) rc = run_ids(run);
  if (rc != 0) return rc;
  const uint64_t peak = tern::cli::peak_rss_bytes();
  report["peak_rss_bytes"] = peak;
  if (opt.json) print_json(report);
  else std::printf("peak memory: %s\n", tern::cli::format_bytes(peak).c_str());
  return 0;
}

}  // namespace

int run_command(int argc, char** argv) {
  try {
    Options opt;
    int code = 0;
    switch (parse_options(argc, argv, &opt, &code)) {
      case Parsed::kDone: return 0;
      case Parsed::kFailed: return code;
      case Parsed::kRun: break;
    }
    return run_all(opt);
  } catch (const std::bad_alloc&) {
    // The checks size what they can before allocating (checks.cpp); this is the last resort for what they cannot.
    return fail("out of memory (a buffer for what the options ask did not fit); ask for fewer tokens or ids");
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  }
}

}  // namespace tern::run
