// SPDX-License-Identifier: MIT
// tern-run's command line: the options, their checks before any work (values, paths, the option grid), and the
// inputs read up front (--score's text, --ids's ids), each error naming the flag as the user typed it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tern/tern.hpp"

namespace tern::run {

// Most bytes --score reads (256 MiB: enwik8 fits); --ids reads at most cli::kMaxIdsJsonBytes.
constexpr uint64_t kMaxScoreBytes = uint64_t(256) << 20;

struct Options {
  std::string model_path, prompt, score_path, ids_path, logits_path, plan;
  bool has_prompt = false;
  bool json = false;        // --json: one JSON object on stdout, nothing else there
  bool ignore_eos = false;  // --ignore-eos: end-of-sequence tokens do not end a generation
  std::vector<std::string> stops;  // --stop, repeatable: texts that end a generation
  bool prompt_specials_as_text = false;  // --prompt-specials text: special-token text in --prompt is plain text
  bool perplexity = false;  // --ids scored through the state
  bool stream = false;      // scoring streams through the state (--segment, or a model without a context limit)
  std::string tokens_flag = "--tokens";  // -n or --tokens, as typed
  int64_t tokens = 200, stride = 0, segment = 0, threads = 0, max_tokens = 0, max_batch = 0;
  int64_t memory_budget = 0;
  int64_t sinks = 0, window = 0;     // --sinks, --window: attention sinks (window 0: none)
  tern_sampler_options sampler;      // --temperature, --top-k, --top-p, --min-p, --repeat-*, --seed
  tern_generator_options generator;  // --context, --keep (--window: sinks)
  tern_backend backend = TERN_BACKEND_CPU;
  int64_t device = -1;  // vulkaninfo's numbering; -1: the best device
  bool f16_weights = false, f16_activations = false, f16_kv = false;
  std::vector<int64_t> plan_sizes;  // --plan's list

  // Read before the model loads: --score's bytes, --ids's ids.
  std::string score_text;
  std::vector<int32_t> prompt_ids;  // --prompt through the model's tokenizer (text_inputs)
  int32_t score_byte_offset = 0;    // --score: the id of byte 0 ("bytes+K" tokenizers)
  std::vector<int32_t> ids;
};

// What parse_options decided.
enum class Parsed { kRun, kDone, kFailed };

// Parses and checks the command line, then checks every path (the model, --score, --ids: regular files, read with
// their size limits; --logits-out: replaceable, its directory writable) before anything is loaded. kDone: --help or
// --version was printed; kFailed: the error was printed, *exit_code says the status.
Parsed parse_options(int argc, char** argv, Options* opt, int* exit_code);

// Checks what needs the model and its session: the vocabulary, the context (--keep, --stride, --max-tokens against
// the prompt, the windows, the ids), the bytes --ids and --logits-out need. False with *error naming the flags.
// Turns --prompt into ids and checks that --score has a byte-level tokenizer, with the model's tokenizer
// (tern_model_tokenizer); false with *error naming the flag.
bool text_inputs(Options& opt, const ModelHandle& model, std::string* error);
bool check_against_session(const Options& opt, const tern_model_info& info, const SessionHandle& session,
                           std::string* error);

// A session-creation error from the library with its option fields (max_tokens, weight_storage, ...) named as
// the flags that set them (--max-tokens, --f16-weights, ...), or as what tern-run sized them from.
std::string session_error_with_flags(const Options& opt, std::string message);

// Prints "tern-run: error: MESSAGE" on one line (newlines in MESSAGE become spaces) and returns code.
int fail(const std::string& message, int code = 1);

}  // namespace tern::run
