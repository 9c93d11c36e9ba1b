// SPDX-License-Identifier: MIT
// Tern's side of the tokenizer check: encodes and decodes every test input of a JSON-lines text file
// (tools/reference/tokenizer_text.py) through the C API and compares with what Hugging Face tokenizers gave for it
// (tools/reference/tokenizer_reference.js's expected file). Prints per mode
//   gpt2 encode: 0 mismatches of 10240 lines
// and the first few mismatches in detail; exits 1 on any mismatch. --speed prints Tern's encode and decode MB/s on
// the same text instead (one thread: each input encoded by one call after the other, total bytes / time).
//
//   build/tools/bench/tokenizer_check MODEL.tern TEXT.jsonl EXPECTED.jsonl [--name gpt2] [--show 3]
//   build/tools/bench/tokenizer_check MODEL.tern TEXT.jsonl EXPECTED.jsonl --speed [--passes 3]
//
// Modes (the expected file's fields):
//   encode             tern_tokenize                                       = encode(text, add_special_tokens=false)
//   encode+special     tern_tokenize_with(TERN_TOKENIZE_ADD_SPECIAL)       = encode(text, add_special_tokens=true)
//   specials-as-text   tern_tokenize_with(TERN_TOKENIZE_SPECIALS_AS_TEXT)  = encode_special_tokens on, no specials
//                      added (skipped where the reference could not give it, saying why)
//   decode             tern_detokenize(ids)                                = decode(ids, skip_special_tokens=false)
//   decode-skip        tern_detokenize(ids_special less the special ids)   = decode(ids_special, skip_special_tokens=
//                      true), which drops the ids whose token is a special token's text (the reference lists them)
//                      before decoding
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "tern/tern.h"

namespace {

struct Expected {
  std::vector<int32_t> ids, ids_special, ids_text;
  bool has_ids_text = false;
  std::string decoded, decoded_skip;
};

struct Reference {
  std::vector<int32_t> special_ids;
  std::string specials_as_text;  // "emulated" or "unavailable: why"
  std::vector<Expected> lines;
};

bool read_lines(const std::string& path, std::vector<std::string>* lines, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open '" + path + "'";
    return false;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines->push_back(line);
  }
  return true;
}

// The test inputs: each line a JSON string.
bool read_texts(const std::string& path, std::vector<std::string>* texts, std::string* error) {
  std::vector<std::string> lines;
  if (!read_lines(path, &lines, error)) return false;
  for (size_t i = 0; i < lines.size(); i++) {
    const auto j = nlohmann::json::parse(lines[i], nullptr, false);
    if (!j.is_string()) {
      *error = path + ":" + std::to_string(i + 1) + ": not a JSON string";
      return false;
    }
    texts->push_back(j.get<std::string>());
  }
  return true;
}

bool read_reference(const std::string& path, Reference* ref, std::string* error) {
  std::vector<std::string> lines;
  if (!read_lines(path, &lines, error)) return false;
  if (lines.empty()) {
    *error = path + ": empty (no header line)";
    return false;
  }
  try {
    const auto header = nlohmann::json::parse(lines[0]);
    ref->special_ids = header.at("special_ids").get<std::vector<int32_t>>();
    ref->specials_as_text = header.at("specials_as_text").get<std::string>();
    for (size_t i = 1; i < lines.size(); i++) {
      const auto j = nlohmann::json::parse(lines[i]);
      Expected e;
      e.ids = j.at("ids").get<std::vector<int32_t>>();
      e.ids_special = j.at("ids_special").get<std::vector<int32_t>>();
      e.has_ids_text = !j.at("ids_text").is_null();
      if (e.has_ids_text) e.ids_text = j.at("ids_text").get<std::vector<int32_t>>();
      e.decoded = j.at("decoded").get<std::string>();
      e.decoded_skip = j.at("decoded_skip").get<std::string>();
      ref->lines.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& err) {
    *error = path + ": " + err.what();
    return false;
  }
  return true;
}

// ids of text with the given flags (0: tern_tokenize); false with the library's message.
bool encode(const tern_model* model, const std::string& text, int flags, std::vector<int32_t>* ids, std::string* error) {
  int64_t n = 0;
  auto call = [&](int32_t* out, int64_t capacity) {
    return flags == 0 ? tern_tokenize(model, text.data(), text.size(), out, capacity, &n)
                      : tern_tokenize_with(model, text.data(), text.size(),
                                           static_cast<decltype(TERN_TOKENIZE_ADD_SPECIAL)>(flags), out, capacity, &n);
  };
  if (call(nullptr, 0) != TERN_OK) {
    *error = tern_last_error();
    return false;
  }
  ids->assign(size_t(n), 0);
  if (call(ids->data(), n) != TERN_OK) {
    *error = tern_last_error();
    return false;
  }
  return true;
}

bool decode(const tern_model* model, const std::vector<int32_t>& ids, std::string* text, std::string* error) {
  size_t len = 0;
  if (tern_detokenize(model, ids.data(), int64_t(ids.size()), nullptr, 0, &len) != TERN_OK) {
    *error = tern_last_error();
    return false;
  }
  text->assign(len, '\0');
  if (tern_detokenize(model, ids.data(), int64_t(ids.size()), text->data(), len, &len) != TERN_OK) {
    *error = tern_last_error();
    return false;
  }
  return true;
}

// A short printable form of a text for the mismatch report: JSON-escaped, cut at `limit` characters.
std::string show_text(const std::string& text, size_t limit = 160) {
  std::string s = nlohmann::json(text).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (s.size() > limit) s = s.substr(0, limit) + "...";
  return s;
}

// "[a, b, c]" of ids[from, to), with "..." where cut.
std::string show_ids(const std::vector<int32_t>& ids, size_t from, size_t to) {
  to = std::min(to, ids.size());
  std::string s = from > 0 ? "[... " : "[";
  for (size_t i = from; i < to; i++) s += std::to_string(ids[i]) + (i + 1 < to ? ", " : "");
  return s + (to < ids.size() ? " ...]" : "]") + " (" + std::to_string(ids.size()) + " ids)";
}

class ModeReport {
 public:
  ModeReport(std::string name, std::string mode, int show) : label_(name + " " + mode), show_(show) {}
  void pass() { lines_++; }
  void fail(size_t line, const std::string& text, const std::string& detail) {
    lines_++;
    if (int(failures_.size()) < show_) {
      failures_.push_back("  line " + std::to_string(line + 1) + " " + show_text(text) + "\n" + detail);
    }
    mismatches_++;
  }
  void ids(size_t line, const std::string& text, const std::vector<int32_t>& want, const std::vector<int32_t>& got) {
    if (want == got) return pass();
    size_t d = 0;
    while (d < want.size() && d < got.size() && want[d] == got[d]) d++;
    const size_t from = d > 4 ? d - 4 : 0;
    fail(line, text, "    first difference at id " + std::to_string(d) + "\n    expected " +
                         show_ids(want, from, d + 8) + "\n    got      " + show_ids(got, from, d + 8));
  }
  void text(size_t line, const std::string& input, const std::string& want, const std::string& got) {
    if (want == got) return pass();
    size_t d = 0;
    while (d < want.size() && d < got.size() && want[d] == got[d]) d++;
    const size_t from = d > 16 ? d - 16 : 0;
    fail(line, input, "    first difference at byte " + std::to_string(d) + "\n    expected " +
                          show_text(want.substr(from, 48)) + "\n    got      " + show_text(got.substr(from, 48)));
  }
  void error(size_t line, const std::string& text, const std::string& message) {
    fail(line, text, "    error: " + message);
  }
  int64_t print() const {
    std::printf("%s: %lld mismatches of %lld lines\n", label_.c_str(), (long long)mismatches_, (long long)lines_);
    for (const auto& f : failures_) std::printf("%s\n", f.c_str());
    return mismatches_;
  }

 private:
  std::string label_;
  int show_;
  int64_t lines_ = 0, mismatches_ = 0;
  std::vector<std::string> failures_;
};

int check(const tern_model* model, const std::vector<std::string>& texts, const Reference& ref, const std::string& name,
          int show) {
  const std::set<int32_t> special(ref.special_ids.begin(), ref.special_ids.end());
  const bool as_text = ref.specials_as_text == "emulated";
  ModeReport enc(name, "encode", show), enc_special(name, "encode+special", show),
      enc_text(name, "specials-as-text", show), dec(name, "decode", show), dec_skip(name, "decode-skip", show);
  std::vector<int32_t> ids;
  std::string out, error;
  for (size_t i = 0; i < texts.size(); i++) {
    const std::string& text = texts[i];
    const Expected& e = ref.lines[i];
    if (encode(model, text, 0, &ids, &error)) enc.ids(i, text, e.ids, ids);
    else enc.error(i, text, error);
    if (encode(model, text, TERN_TOKENIZE_ADD_SPECIAL, &ids, &error)) enc_special.ids(i, text, e.ids_special, ids);
    else enc_special.error(i, text, error);
    if (as_text) {
      if (encode(model, text, TERN_TOKENIZE_SPECIALS_AS_TEXT, &ids, &error)) enc_text.ids(i, text, e.ids_text, ids);
      else enc_text.error(i, text, error);
    }
    if (decode(model, e.ids, &out, &error)) dec.text(i, text, e.decoded, out);
    else dec.error(i, text, error);
    std::vector<int32_t> kept;
    for (int32_t id : e.ids_special) {
      if (!special.count(id)) kept.push_back(id);
    }
    if (decode(model, kept, &out, &error)) dec_skip.text(i, text, e.decoded_skip, out);
    else dec_skip.error(i, text, error);
  }
  int64_t mismatches = enc.print() + enc_special.print();
  if (as_text) mismatches += enc_text.print();
  else std::printf("%s specials-as-text: skipped (reference %s)\n", name.c_str(), ref.specials_as_text.c_str());
  mismatches += dec.print() + dec_skip.print();
  return mismatches == 0 ? 0 : 1;
}

double mb_per_second(size_t bytes, double seconds) { return double(bytes) / 1e6 / seconds; }

// Encode and decode MB/s, the best of `passes` passes over every input, one call per input, one thread.
int speed(const tern_model* model, const std::vector<std::string>& texts, const Reference& ref, const std::string& name,
          int passes) {
  size_t bytes = 0, tokens = 0;
  for (const auto& t : texts) bytes += t.size();
  for (const auto& e : ref.lines) tokens += e.ids.size();
  std::vector<int32_t> ids(1 << 16);
  std::string out(1 << 20, '\0');
  double best_encode = 1e30, best_decode = 1e30;
  for (int p = 0; p < passes; p++) {
    auto start = std::chrono::steady_clock::now();
    for (const auto& t : texts) {
      int64_t n = 0;
      if (tern_tokenize(model, t.data(), t.size(), nullptr, 0, &n) != TERN_OK) return 1;
      if (size_t(n) > ids.size()) ids.resize(size_t(n));
      if (tern_tokenize(model, t.data(), t.size(), ids.data(), int64_t(ids.size()), &n) != TERN_OK) return 1;
    }
    best_encode = std::min(best_encode, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    start = std::chrono::steady_clock::now();
    for (const auto& e : ref.lines) {
      size_t len = 0;
      if (tern_detokenize(model, e.ids.data(), int64_t(e.ids.size()), out.data(), out.size(), &len) != TERN_OK) {
        out.resize(len);
        if (tern_detokenize(model, e.ids.data(), int64_t(e.ids.size()), out.data(), out.size(), &len) != TERN_OK) return 1;
      }
    }
    best_decode = std::min(best_decode, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("tern %s: %zu bytes, %zu tokens, 1 thread: encode %.2f MB/s, decode %.2f MB/s (a call per line, best of %d)\n",
              name.c_str(), bytes, tokens, mb_per_second(bytes, best_encode), mb_per_second(bytes, best_decode), passes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tern::cli::Args args(argc, argv, {"--name", "--show", "--passes"}, {"--speed", "-h", "--help"});
  if (args.has("-h") || args.has("--help") || args.positional().size() != 3) {
    std::fprintf(stderr,
                 "usage: tokenizer_check MODEL.tern TEXT.jsonl EXPECTED.jsonl [--name NAME] [--show 3]\n"
                 "       tokenizer_check MODEL.tern TEXT.jsonl EXPECTED.jsonl --speed [--passes 3]\n");
    return args.has("-h") || args.has("--help") ? 0 : 2;
  }
  const std::string name = args.get("--name", "tokenizer");
  const int show = int(args.get_int("--show", 3, 0, 1000));
  const int passes = int(args.get_int("--passes", 3, 1, 1000));
  if (!args.ok()) {
    std::fprintf(stderr, "tokenizer_check: %s\n", args.error().c_str());
    return 2;
  }
  std::vector<std::string> texts;
  Reference ref;
  std::string error;
  if (!read_texts(args.positional()[1], &texts, &error) || !read_reference(args.positional()[2], &ref, &error)) {
    std::fprintf(stderr, "tokenizer_check: %s\n", error.c_str());
    return 2;
  }
  if (texts.size() != ref.lines.size()) {
    std::fprintf(stderr, "tokenizer_check: %zu test inputs but %zu expected lines: the files do not belong together\n",
                 texts.size(), ref.lines.size());
    return 2;
  }
  tern_model* model = nullptr;
  if (tern_model_load(args.positional()[0].c_str(), &model) != TERN_OK) {
    std::fprintf(stderr, "tokenizer_check: %s\n", tern_last_error());
    return 2;
  }
  const int rc = args.has("--speed") ? speed(model, texts, ref, name, passes) : check(model, texts, ref, name, show);
  if (rc != 0 && args.has("--speed")) std::fprintf(stderr, "tokenizer_check: %s\n", tern_last_error());
  tern_model_free(model);
  return rc;
}
