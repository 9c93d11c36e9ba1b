// SPDX-License-Identifier: MIT
#include "text/tokenizer.h"

namespace tern {
namespace {

// Views of the file's SentencePiece table; the loader has verified the FlatBuffer, not the contents.
Result<SentencePieceSpec> spec_of(const fb::SentencePiece& sp, int64_t vocab_size) {
  const auto* pieces = sp.pieces();
  const auto* scores = sp.scores();
  const auto* types = sp.types();
  const auto count = [](const auto* v) { return v ? int64_t(v->size()) : int64_t(0); };
  if (count(pieces) != vocab_size || count(scores) != vocab_size || count(types) != vocab_size) {
    return InvalidModel("vocabulary: the sentencepiece table has " + std::to_string(count(pieces)) + " pieces, " +
                        std::to_string(count(scores)) + " scores and " + std::to_string(count(types)) +
                        " types for a vocabulary of " + std::to_string(vocab_size));
  }
  SentencePieceSpec spec;
  spec.bpe = sp.bpe();
  spec.pieces.reserve(size_t(vocab_size));
  spec.scores.reserve(size_t(vocab_size));
  spec.types.reserve(size_t(vocab_size));
  for (int64_t i = 0; i < vocab_size; ++i) {
    const flatbuffers::String* p = pieces->Get(flatbuffers::uoffset_t(i));
    spec.pieces.emplace_back(p->data(), p->size());
    spec.scores.push_back(scores->Get(flatbuffers::uoffset_t(i)));
    const uint8_t t = types->Get(flatbuffers::uoffset_t(i));
    if (t < 1 || t > 6) {
      return InvalidModel("vocabulary: sentencepiece piece " + std::to_string(i) + " has type " + std::to_string(t) +
                          ", not 1..6");
    }
    spec.types.push_back(PieceType(t));
  }
  if (const auto* map = sp.precompiled_charsmap())
    spec.precompiled_charsmap = std::string_view(reinterpret_cast<const char*>(map->data()), map->size());
  spec.add_dummy_prefix = sp.add_dummy_prefix();
  spec.remove_extra_whitespaces = sp.remove_extra_whitespaces();
  spec.escape_whitespaces = sp.escape_whitespaces();
  spec.treat_whitespace_as_suffix = sp.treat_whitespace_as_suffix();
  spec.byte_fallback = sp.byte_fallback();
  spec.unk_id = sp.unk_id();
  return spec;
}

Status check_special(const char* what, int32_t id, int64_t vocab_size) {
  if (id < -1 || id >= vocab_size) {
    return InvalidModel(std::string("vocabulary: ") + what + " " + std::to_string(id) + " is outside [-1, " +
                        std::to_string(vocab_size) + ")");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_vocabulary(const fb::Vocabulary* vocab, int64_t vocab_size) {
  if (vocab == nullptr) return std::unique_ptr<Tokenizer>();
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->vocab_size_ = vocab_size;
  t->bos_ = vocab->bos_id();
  t->eos_ = vocab->eos_id();
  t->unk_ = vocab->unk_id();
  t->pad_ = vocab->pad_id();
  TERN_RETURN_IF_ERROR(check_special("bos_id", t->bos_, vocab_size));
  TERN_RETURN_IF_ERROR(check_special("eos_id", t->eos_, vocab_size));
  TERN_RETURN_IF_ERROR(check_special("unk_id", t->unk_, vocab_size));
  TERN_RETURN_IF_ERROR(check_special("pad_id", t->pad_, vocab_size));
  if (const auto* extra = vocab->extra_eos_ids()) {
    if (extra->size() > 1024) return InvalidModel("vocabulary: more than 1024 extra_eos_ids");
    for (int32_t id : *extra) {
      if (id < 0 || id >= vocab_size) {
        return InvalidModel("vocabulary: extra_eos_ids entry " + std::to_string(id) + " is outside [0, " +
                            std::to_string(vocab_size) + ")");
      }
      t->extra_eos_.push_back(id);
    }
  }
  t->add_bos_ = vocab->add_bos();
  switch (vocab->kind()) {
    case fb::VocabKind::BYTES:
      t->name_ = "bytes";
      return t;
    case fb::VocabKind::SHIFTED_BYTES: {
      const int32_t offset = vocab->byte_offset();
      if (offset < 0 || offset > (1 << 24)) {
        return InvalidModel("vocabulary: byte_offset " + std::to_string(offset) + " is outside [0, 2^24]");
      }
      t->byte_offset_ = offset;
      t->name_ = "bytes+" + std::to_string(offset);
      return t;
    }
    case fb::VocabKind::SENTENCEPIECE: {
      if (vocab->sentencepiece() == nullptr) return InvalidModel("vocabulary: kind SENTENCEPIECE without its table");
      TERN_ASSIGN_OR_RETURN(SentencePieceSpec spec, spec_of(*vocab->sentencepiece(), vocab_size));
      const bool bpe = spec.bpe;
      TERN_ASSIGN_OR_RETURN(SentencePieceTokenizer sp, SentencePieceTokenizer::create(std::move(spec)));
      t->kind_ = Kind::kSentencePiece;
      t->sentencepiece_ = std::make_unique<SentencePieceTokenizer>(std::move(sp));
      t->name_ = bpe ? "sentencepiece-bpe" : "sentencepiece-unigram";
      return t;
    }
    case fb::VocabKind::SYMBOLS: {
      if (vocab->symbols() == nullptr) return InvalidModel("vocabulary: kind SYMBOLS without its table");
      TERN_ASSIGN_OR_RETURN(SymbolVocab symbols, SymbolVocab::create(*vocab->symbols(), vocab_size, t->eos_, t->unk_));
      t->kind_ = Kind::kSymbols;
      t->symbols_ = std::make_unique<SymbolVocab>(std::move(symbols));
      t->name_ = t->symbols_->unit_name();
      return t;
    }
    case fb::VocabKind::HF_TOKENIZER: {
      if (vocab->hf_tokenizer() == nullptr) return InvalidModel("vocabulary: kind HF_TOKENIZER without its table");
      TERN_ASSIGN_OR_RETURN(t->hf_, HfTokenizer::from_table(*vocab->hf_tokenizer(), vocab_size));
      t->kind_ = Kind::kHf;
      t->name_ = t->hf_->is_bpe() ? "hf-bpe" : "hf-unigram";
      return t;
    }
    default:
      return std::unique_ptr<Tokenizer>();  // EXTERNAL, or a kind newer than this library: ids only
  }
}

Status Tokenizer::encode(std::string_view text, bool add_special, bool specials_as_text,
                         std::vector<int32_t>* ids) const {
  if (kind_ == Kind::kHf) return hf_->encode(text, add_special, !specials_as_text, ids);
  if (add_special && adds_bos()) ids->push_back(bos_);
  if (kind_ == Kind::kSymbols) return symbols_->encode(text, ids);
  if (kind_ == Kind::kSentencePiece) {
    if (ids->empty()) return sentencepiece_->encode(text, ids);  // the usual case: no copy of the ids
    std::vector<int32_t> out;
    TERN_RETURN_IF_ERROR(sentencepiece_->encode(text, &out));
    ids->insert(ids->end(), out.begin(), out.end());
    return Status::Ok();
  }
  ids->reserve(ids->size() + text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int64_t id = int64_t(static_cast<unsigned char>(text[i])) + byte_offset_;
    if (id >= vocab_size_) {
      return InvalidArgument("byte " + std::to_string(static_cast<unsigned char>(text[i])) + " at offset " +
                             std::to_string(i) + " is outside the model's vocabulary of " +
                             std::to_string(vocab_size_) + " tokens");
    }
    ids->push_back(int32_t(id));
  }
  return Status::Ok();
}

std::string Tokenizer::decode(const int32_t* ids, size_t n) const {
  if (kind_ == Kind::kHf) return hf_->decode(ids, n, false);
  if (kind_ == Kind::kSentencePiece) return sentencepiece_->decode(ids, n);
  if (kind_ == Kind::kSymbols) return symbols_->decode(ids, n);
  std::string text;
  text.reserve(n);
  for (size_t i = 0; i < n; ++i) text += piece_text(ids[i]);
  return text;
}

std::string Tokenizer::piece_text(int32_t id) const {
  if (kind_ == Kind::kHf) return hf_->piece_text(id);
  if (kind_ == Kind::kSentencePiece) return sentencepiece_->piece_text(id);
  if (kind_ == Kind::kSymbols) return symbols_->piece_text(id);
  const int64_t b = int64_t(id) - byte_offset_;
  if (b < 0 || b > 255) return std::string();  // special tokens have no text
  return std::string(1, char(static_cast<unsigned char>(b)));
}

bool Tokenizer::is_end(int32_t id) const {
  if (id < 0) return false;
  if (id == eos_) return true;
  for (int32_t e : extra_eos_)
    if (e == id) return true;
  return false;
}

}  // namespace tern
