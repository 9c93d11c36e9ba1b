// SPDX-License-Identifier: MIT
// The model vocabulary of a tokenizer.json section (fb::HfTokenizer.pieces): each id's token and the reverse map,
// shared by the BPE and Unigram models and the decoders. Views into the model file, which outlives them.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"

namespace tern {

struct HfVocab {
  std::vector<std::string_view> pieces;               // [vocab_size]; "" where the model has no token
  std::unordered_map<std::string_view, int32_t> ids;  // every non-empty piece -> its id

  // Checks pieces (exactly vocab_size of them, none longer than kMaxPieceBytes, no non-empty piece twice) and builds
  // the map. Errors name the field
  // and the id: "hf_tokenizer.pieces: 17 and 40 are both \"ab\"".
  static Result<HfVocab> from_table(const fb::HfTokenizer& table, int64_t vocab_size);

  int32_t find(std::string_view piece) const {
    auto it = ids.find(piece);
    return it == ids.end() ? -1 : it->second;
  }
};

// The id of each byte's <0xNN> token ("<0x0A>": upper-case hex, as both models spell it), -1 where it is missing.
void hf_byte_piece_ids(const HfVocab& vocab, int32_t (&ids)[256]);

}  // namespace tern
