// SPDX-License-Identifier: MIT
// The option grid against the loaded model and its session, checked before any mode runs: what the flags ask must
// fit the context, the vocabulary and the machine's memory, and every message names the flags that do not agree.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "cli.h"
#include "options.h"

namespace tern::run {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// "the model's context" or "--max-tokens", whichever set the session's sequence limit.
std::string context_source(const Options& opt) { return opt.max_tokens > 0 ? "--max-tokens" : "the model's context"; }

// The session's max_batch: tern_session_memory's n_tokens.
int64_t max_batch(const SessionHandle& session) {
  tern_memory_plan p{};
  tern_session_memory(session.get(), &p);
  return p.n_tokens;
}

bool check_prompt(const Options& opt, int64_t limit, std::string* error) {
  const int64_t tokens = std::max<int64_t>(1, int64_t(opt.prompt_ids.size()));
  if (opt.max_tokens > 0 && tokens > opt.max_tokens) {
    *error = "--max-tokens " + str(opt.max_tokens) + " is less than the prompt's " + str(tokens) +
             " tokens; give at least " + str(tokens) + ", or leave it out to keep the prompt's last tokens";
    return false;
  }
  const tern_context_policy policy = opt.generator.context_policy;
  if (policy != TERN_CONTEXT_SLIDE && policy != TERN_CONTEXT_SHIFT) return true;
  const std::string flag = policy == TERN_CONTEXT_SLIDE ? "--context slide" : "--context shift";
  if (opt.generator.keep_tokens >= limit) {
    *error = "--keep " + str(opt.generator.keep_tokens) + " must be less than the context of " + str(limit) +
             " tokens (" + context_source(opt) + ")";
    return false;
  }
  if (limit < 2) {
    *error = flag + " needs a context of at least 2 tokens (it keeps some and generates after them); " +
             context_source(opt) + " is " + str(limit) + ": use --context stop";
    return false;
  }
  return true;
}

bool check_windows(const Options& opt, const SessionHandle& session, int64_t context, std::string* error) {
  const int64_t n = int64_t(opt.score_text.size());
  if (context < 2) {
    *error = "--score needs windows of at least 2 tokens; " + context_source(opt) + " is " + str(context);
    return false;
  }
  const int64_t window = std::min(context, n);
  const std::string what = window == n && n < context ? "the file's length" : context_source(opt);
  if (opt.stride >= window) {
    *error = "--stride " + str(opt.stride) + " must be less than the window of " + str(window) + " tokens (" + what +
             "): each window predicts the bytes after the previous one's end";
    return false;
  }
  const int64_t batch = max_batch(session);
  if (window > batch) {
    *error = "--max-batch " + str(batch) + " is less than --score's window of " + str(window) + " tokens";
    return false;
  }
  return true;
}

bool check_ids(const Options& opt, const SessionHandle& session, int64_t limit, std::string* error) {
  const int64_t n = int64_t(opt.ids.size()), vocab = session.vocab_size();
  for (size_t i = 0; i < opt.ids.size(); ++i) {
    if (opt.ids[i] < 0 || opt.ids[i] >= vocab) {
      *error = "--ids: element " + str(int64_t(i)) + " of '" + opt.ids_path + "' is " + str(opt.ids[i]) +
               ", outside the model's vocabulary [0, " + str(vocab) + ")";
      return false;
    }
  }
  if (n > limit) {
    *error = "--ids: " + str(n) + " ids do not fit the session's " + str(limit) + " tokens (" + context_source(opt) + ")";
    return false;
  }
  const int64_t batch = max_batch(session);
  if (!opt.perplexity && opt.segment == 0 && n > batch) {
    *error = "--ids: " + str(n) + " ids in one call exceed --max-batch " + str(batch) +
             "; --segment N feeds them N at a time";
    return false;
  }
  // Every row's logits are kept for --logits-out and for one forward call.
  if (!opt.logits_path.empty() || (!opt.perplexity && opt.segment == 0)) {
    std::string what;
    const double need = double(n) * double(vocab) * 4.0, have = double(tern::cli::usable_memory(&what));
    if (need > have) {
      const std::string flag = opt.logits_path.empty() ? "--ids" : "--logits-out";
      char bytes[32];
      std::snprintf(bytes, sizeof bytes, "%.0f", need);
      *error = flag + ": " + str(n) + " ids x " + str(vocab) + " logits need " + bytes +
               " bytes of float32, more than " + what + ", " + std::to_string(uint64_t(have)) + " bytes";
      return false;
    }
  }
  return true;
}

}  // namespace

bool text_inputs(Options& opt, const ModelHandle& model, std::string* error) {
  const std::string tokenizer = tern_model_tokenizer(model.get());
  const int64_t vocab = model.info().vocab_size;
  if (opt.has_prompt) {
    if (tokenizer.empty()) {
      *error = "--prompt needs a model file that carries a tokenizer; this one has ids only (a vocabulary of " +
               str(vocab) + "): use --ids, or convert it with tern-convert --tokenizer FILE";
      return false;
    }
    // The tokenizer's own start ids (Llama's BOS, a tokenizer.json post-processor's prefix) come first, as the
    // model was trained.
    const uint32_t flags = TERN_TOKENIZE_ADD_SPECIAL | (opt.prompt_specials_as_text ? TERN_TOKENIZE_SPECIALS_AS_TEXT : 0u);
    if (auto err = tokenize(model, opt.prompt, &opt.prompt_ids, flags)) {
      *error = "--prompt: " + err.message;
      return false;
    }
    if (opt.prompt_ids.empty()) {  // an empty prompt (or one the normalizer empties) starts from a BOS, an EOS or "\n"
      const int32_t start = tern_model_special_token(model.get(), TERN_TOKEN_BOS) >= 0
                                ? tern_model_special_token(model.get(), TERN_TOKEN_BOS)
                                : tern_model_special_token(model.get(), TERN_TOKEN_EOS);
      if (start >= 0) {
        opt.prompt_ids.push_back(start);
      } else if (auto err = tokenize(model, "\n", &opt.prompt_ids); err || opt.prompt_ids.empty()) {
        *error = "--prompt is empty and the model has no start token: give a prompt";
        return false;
      }
    }
  }
  if (!opt.score_path.empty()) {
    if (tokenizer == "bytes") {
      opt.score_byte_offset = 0;
    } else if (tokenizer.rfind("bytes+", 0) == 0) {
      opt.score_byte_offset = int32_t(std::stol(tokenizer.substr(6)));
    } else {
      *error = "--score measures bits per byte and needs a byte-level model; this one's tokenizer is " +
               (tokenizer.empty() ? std::string("absent (ids only)") : "'" + tokenizer + "'") +
               ": use --ids with --perplexity";
      return false;
    }
    if (opt.score_byte_offset + 256 > vocab) {
      for (size_t i = 0; i < opt.score_text.size(); ++i) {
        const int64_t id = int64_t(static_cast<unsigned char>(opt.score_text[i])) + opt.score_byte_offset;
        if (id >= vocab) {
          *error = "--score: byte " + str(id - opt.score_byte_offset) + " at offset " + str(int64_t(i)) +
                   " is outside the model's vocabulary of " + str(vocab) + " tokens";
          return false;
        }
      }
    }
  }
  return true;
}

bool check_against_session(const Options& opt, const tern_model_info& info, const SessionHandle& session,
                           std::string* error) {
  const int64_t limit = tern_session_sequence_limit(session.get());
  if (opt.has_prompt && !check_prompt(opt, limit, error)) return false;
  if (!opt.score_path.empty()) {
    if (!opt.stream) {
      const int64_t context = opt.max_tokens > 0 ? opt.max_tokens : info.max_context;
      if (!check_windows(opt, session, context, error)) return false;
    } else if (int64_t(opt.score_text.size()) > limit) {
      *error = "--score: " + str(int64_t(opt.score_text.size())) + " bytes do not fit the session's " + str(limit) +
               " tokens (" + context_source(opt) + ")";
      return false;
    }
    if (opt.stride > 0 && opt.stream) {
      *error = "--stride: this model has no context limit, so --score streams the text through its state in "
               "--segment calls: there are no windows";
      return false;
    }
  }
  return opt.ids_path.empty() || check_ids(opt, session, limit, error);
}

namespace {

// Replaces every whole-word occurrence of `from` in *text with `to`.
void replace_word(std::string* text, const std::string& from, const std::string& to) {
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at)) {
    const size_t end = at + from.size();
    if ((at > 0 && is_word((*text)[at - 1])) || (end < text->size() && is_word((*text)[end]))) {
      at = end;
      continue;
    }
    text->replace(at, from.size(), to);
    at += to.size();
  }
}

}  // namespace

std::string session_error_with_flags(const Options& opt, std::string message) {
  // What set each field: the flag when it was typed, otherwise what tern-run sized it from.
  const std::string max_tokens = opt.max_tokens > 0 ? "--max-tokens" : "a session of";
  const std::string max_batch = opt.max_batch > 0 ? "--max-batch" : opt.stream ? "--segment" : "calls of up to";
  replace_word(&message, "set max_tokens", "give --max-tokens");  // a request to the user names the flag to type
  replace_word(&message, "max_tokens", max_tokens);
  replace_word(&message, "max_batch", max_batch);
  replace_word(&message, "weight_storage F16", "--f16-weights");
  replace_word(&message, "activation_storage F16", "--f16-activations");
  replace_word(&message, "use weight_storage F32", "leave out --f16-weights");
  replace_word(&message, "activation_storage F32", "leave out --f16-activations");
  replace_word(&message, "kv_storage F16", "--f16-kv");
  replace_word(&message, "kv_storage F32", "leave out --f16-kv");
  replace_word(&message, "weight_storage F32", "leave out --f16-weights");
  replace_word(&message, "use backend CPU", "use --backend cpu");
  replace_word(&message, "use backend Vulkan", "use --backend vulkan");
  replace_word(&message, "its memory budget of", "--memory-budget");
  if (opt.stream && opt.max_tokens == 0 && message.find("a session of") != std::string::npos)
    message += " (--segment streams the whole input through one session; without it --score runs in windows of the "
               "model's context)";
  if (message.rfind("cannot start a thread pool", 0) == 0) message = "--threads " + str(opt.threads) + ": " + message;
  return message;
}

}  // namespace tern::run
