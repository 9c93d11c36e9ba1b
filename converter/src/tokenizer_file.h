// The tokenizer a converted model carries (schema/README.md, "Tokenizers"): a SentencePiece model file beside
// config.json (spiece.model, as HF ReformerTokenizer and T5 name it, or tokenizer.model), or the one --tokenizer
// names, becomes the model's SENTENCEPIECE vocabulary; --tokenizer none keeps what the importer wrote.
#pragma once

#include <string>

#include "core/status.h"
#include "graph_builder.h"

namespace tern::convert {

// What --tokenizer says: empty: look beside config.json; "none": no tokenizer file; otherwise a path.
struct TokenizerChoice {
  std::string path;
  bool none = false;
};

// Attaches the tokenizer to *metadata. The file's pieces must number exactly metadata->vocab_size (the width of
// the logits): "'ckpt/spiece.model' holds 320 pieces; the model's vocabulary has 258 tokens". *used: the path read
// ("" when none). A byte-level vocabulary (BYTES, SHIFTED_BYTES) is replaced only by an explicit --tokenizer.
Status attach_tokenizer(const std::string& checkpoint_dir, const TokenizerChoice& choice, ModelMetadata* metadata,
                        std::string* used);

}  // namespace tern::convert
