// SPDX-License-Identifier: MIT
#include "text/hf_vocab.h"

#include <cstdio>
#include <string>

#include "text/token_limits.h"

namespace tern {

Result<HfVocab> HfVocab::from_table(const fb::HfTokenizer& table, int64_t vocab_size) {
  const auto* pieces = table.pieces();
  const int64_t count = pieces ? int64_t(pieces->size()) : 0;
  if (count != vocab_size) {
    return InvalidModel("vocabulary: hf_tokenizer.pieces has " + std::to_string(count) +
                        " entries for a vocabulary of " + std::to_string(vocab_size));
  }
  HfVocab vocab;
  vocab.pieces.reserve(size_t(count));
  vocab.ids.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    const flatbuffers::String* p = pieces->Get(flatbuffers::uoffset_t(i));
    const std::string_view piece(p->data(), p->size());
    if (piece.size() > kMaxPieceBytes) {
      return InvalidModel(piece_too_long_message("vocabulary: hf_tokenizer.pieces " + std::to_string(i), piece.size()));
    }
    vocab.pieces.push_back(piece);
    if (piece.empty()) continue;
    const auto inserted = vocab.ids.emplace(piece, int32_t(i));
    if (!inserted.second) {
      return InvalidModel("vocabulary: hf_tokenizer.pieces " + std::to_string(inserted.first->second) + " and " +
                          std::to_string(i) + " are the same token (" + std::to_string(piece.size()) + " bytes)");
    }
  }
  return vocab;
}

void hf_byte_piece_ids(const HfVocab& vocab, int32_t (&ids)[256]) {
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    ids[b] = vocab.find(name);
  }
}

}  // namespace tern
