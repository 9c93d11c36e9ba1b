// SPDX-License-Identifier: MIT
// The tokenizer a converted model carries (schema/README.md, "Tokenizers"): a symbol list (tern_vocab.json,
// symbols_file.h) becomes a SYMBOLS vocabulary, a Hugging Face tokenizer.json (hf_tokenizer_json.h) an
// HF_TOKENIZER one, a SentencePiece model file (spiece.model, as HF ReformerTokenizer and T5 name it, or
// tokenizer.model) a SENTENCEPIECE one; the first of those beside config.json, in that order, or the file
// --tokenizer names (a .json is a tokenizer.json when is_hf_tokenizer_json says so, else a symbol list).
// --tokenizer none keeps what the importer wrote.
#pragma once

#include <string>

#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

// What --tokenizer says: empty: look beside config.json; "none": no tokenizer file; otherwise a path.
struct TokenizerChoice {
  std::string path;
  bool none = false;
};

// Attaches the tokenizer to *metadata. The file's pieces must number exactly metadata->vocab_size (the width of
// the logits; a tokenizer.json's ids need only be below it): "'ckpt/spiece.model' holds 320 pieces; the model's vocabulary has 258 tokens". *used: the path read
// ("" when none). A byte-level vocabulary (BYTES, SHIFTED_BYTES) is replaced only by an explicit --tokenizer.
Status attach_tokenizer(const std::string& checkpoint_dir, const TokenizerChoice& choice, ModelMetadata* metadata,
                        std::string* used);

}  // namespace tern::convert
