// SPDX-License-Identifier: MIT
// Reading a Hugging Face tokenizer.json (the `tokenizers` library's serialization, version 1.0) into the HfTokenizer
// table of an HF_TOKENIZER vocabulary (schema/tern.fbs). Each component is read as tokenizers 0.23's serde format
// reads it (tokenizer/serialization.rs, models/bpe and models/unigram serialization.rs, normalizers/,
// pre_tokenizers/, decoders/, processors/), its fields required or defaulted as there, and checked as its
// constructor checks it (BPE merges against the vocabulary, regular expressions compiled, a precompiled charsmap
// parsed). What the runtime does not implement (WordPiece, BertNormalizer, ...) is refused naming the type:
//   'tok/tokenizer.json': pre_tokenizer type 'Foo' is not supported (supported: ByteLevel, Split, ...)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern::convert {

// One normalizer, pre-tokenizer or decoder (fb::HfStep): `kind` is an fb::HfNormalizer, fb::HfPreTokenizer or
// fb::HfDecoder value by the list it is in; each kind sets only the fields the schema names beside it.
struct HfStepSpec {
  uint8_t kind = 0;
  std::string pattern;
  bool pattern_is_regex = false;
  std::string content;
  fb::HfSplitBehavior behavior = fb::HfSplitBehavior::REMOVED;
  bool invert = false;
  bool add_prefix_space = false;
  bool use_regex = false;
  fb::HfPrependScheme prepend_scheme = fb::HfPrependScheme::ALWAYS;
  bool split = false;
  bool individual_digits = false;
  bool left = false, right = false;
  int32_t start = 0, stop = 0;
  std::string precompiled_charsmap;  // PRECOMPILED: the decoded bytes
};

struct HfAddedTokenSpec {
  int32_t id = 0;
  std::string content;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
};

// A tokenizer.json's contents as the schema's HfTokenizer holds them.
struct HfTokenizerJson {
  fb::HfModelKind model = fb::HfModelKind::BPE;
  std::vector<std::string> pieces;  // [vocab_size]: the model vocabulary's token of each id, "" where none
  std::vector<int32_t> merges;      // BPE: [3 * merges] (left id, right id, merged id), in rank order
  std::vector<double> scores;       // UNIGRAM: [vocab_size], 0 where pieces is ""
  int32_t unk_id = -1;
  bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
  std::vector<HfStepSpec> normalizers, pre_tokenizers, decoders;  // Sequences flattened, in order
  std::vector<HfAddedTokenSpec> added_tokens;                     // in the file's order
  std::vector<int32_t> prefix_ids, suffix_ids;  // the post-processor's ids around a single text
  int64_t model_vocab_entries = 0;              // tokens of the model's own vocabulary (before added tokens)

  // The id of `token` among the added tokens, then the model vocabulary; -1 when neither has it.
  int32_t id_of(const std::string& token) const;
};

// Reads `path`; every id must be below `vocab_size` (the width of the logits): "'t/tokenizer.json': token id 128255
// ('<|eot|>') is not below the model's vocabulary size 128000 (the width of its logits)". Fewer ids are fine: the
// rows past them have "" pieces.
Result<HfTokenizerJson> read_hf_tokenizer_json(const std::string& path, int64_t vocab_size);

// Whether `path` is a tokenizer.json rather than a symbol list (symbols_file.h): named tokenizer.json, or a .json
// whose top level has a "model" object with a "type". A file that cannot be read counts as not one.
bool is_hf_tokenizer_json(const std::string& path);

// The special tokens of tokenizer_config.json (bos_token, eos_token: a string or {"content": ...}), then
// special_tokens_map.json, in `dir`, looked up in `tokenizer`; -1 where a file names none or names a token the
// tokenizer lacks.
Status hf_tokenizer_special_ids(const std::string& dir, const HfTokenizerJson& tokenizer, int32_t* bos_id,
                                int32_t* eos_id);

}  // namespace tern::convert
