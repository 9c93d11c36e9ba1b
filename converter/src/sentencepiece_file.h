// SPDX-License-Identifier: MIT
// Reading a SentencePiece .model file (a serialized sentencepiece.ModelProto) into what Tern's tokenizer runs
// (text/sentencepiece.h). libsentencepiece loads and validates it (and runs its self-test samples) and gives the
// pieces, scores and special ids; what its API does not expose (model type, byte fallback, whitespace as suffix,
// unk_surface, the normalizer and denormalizer specs, and user-defined piece types: it has no IsUserDefined) is read
// from the protobuf wire format directly, the types checked against the API where it tells them. A model Tern cannot encode and decode exactly as libsentencepiece
// does is refused, naming the path and the setting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/sentencepiece.h"
#include "format/status.h"

namespace tern::convert {

// A .model file's contents, owning its bytes.
struct SentencePieceFile {
  bool bpe = false;                    // TrainerSpec.model_type BPE; false: UNIGRAM
  std::vector<std::string> pieces;     // [V]
  std::vector<float> scores;           // [V]
  std::vector<PieceType> types;        // [V]
  std::string normalizer_name;         // NormalizerSpec.name ("nmt_nfkc", "identity", ...), for messages only
  std::string precompiled_charsmap;    // NormalizerSpec.precompiled_charsmap; empty: no character mapping
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  bool treat_whitespace_as_suffix = false, byte_fallback = false;
  int32_t unk_id = 0;
  int32_t bos_id = -1, eos_id = -1, pad_id = -1;  // -1: the model has no such control piece

  // Views into this object: it must outlive the spec and any tokenizer made from it.
  SentencePieceSpec spec() const;
};

// "cannot open 'x.model': ..."; "'x.model' is not a SentencePiece model: ..."; "'x.model': model_type WORD is not
// supported (only UNIGRAM and BPE)". The result has passed SentencePieceTokenizer::create's checks too. Before
// libsentencepiece reads the file, its wire format is read for the pieces: one longer than kMaxPieceBytes
// ("'x.model': piece 7 is 120000 bytes long; a token may be at most 1024 bytes") or, with vocab_size >= 0, a count
// other than vocab_size ("'x.model' holds 320 pieces; the model's vocabulary has 258 tokens (the width of its
// logits)", followed by count_note) is refused there.
Result<SentencePieceFile> read_sentencepiece_file(const std::string& path, int64_t vocab_size = -1,
                                                  const std::string& count_note = "");

// The same from the file's bytes; `name` stands for the file in messages.
Result<SentencePieceFile> parse_sentencepiece_model(const std::string& bytes, const std::string& name,
                                                    int64_t vocab_size = -1, const std::string& count_note = "");

}  // namespace tern::convert
