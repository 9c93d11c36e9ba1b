// SPDX-License-Identifier: MIT
#include "vocabulary_table.h"

#include <string>
#include <vector>

#include "hf_tokenizer_json.h"
#include "sentencepiece_file.h"
#include "symbols_file.h"

namespace tern::convert {
namespace {

// The SentencePiece table of a SENTENCEPIECE vocabulary; 0 (absent) for the other kinds.
flatbuffers::Offset<fb::SentencePiece> build_sentencepiece(flatbuffers::FlatBufferBuilder& fbb,
                                                           const SentencePieceFile* sp) {
  if (sp == nullptr) return 0;
  std::vector<flatbuffers::Offset<flatbuffers::String>> pieces;
  pieces.reserve(sp->pieces.size());
  for (const std::string& p : sp->pieces) pieces.push_back(fbb.CreateString(p));
  std::vector<uint8_t> types(sp->types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = uint8_t(sp->types[i]);
  const std::vector<uint8_t> charsmap(sp->precompiled_charsmap.begin(), sp->precompiled_charsmap.end());
  return fb::CreateSentencePieceDirect(fbb, sp->bpe, &pieces, &sp->scores, &types, &charsmap, sp->add_dummy_prefix,
                                       sp->remove_extra_whitespaces, sp->escape_whitespaces,
                                       sp->treat_whitespace_as_suffix, sp->byte_fallback, sp->unk_id);
}

// The symbol table of a SYMBOLS vocabulary; 0 (absent) for the other kinds.
flatbuffers::Offset<fb::Symbols> build_symbols(flatbuffers::FlatBufferBuilder& fbb, const SymbolsFile* file) {
  if (file == nullptr) return 0;
  std::vector<flatbuffers::Offset<flatbuffers::String>> symbols;
  symbols.reserve(file->symbols.size());
  for (const std::string& s : file->symbols) symbols.push_back(fbb.CreateString(s));
  return fb::CreateSymbolsDirect(fbb, file->unit, &symbols, file->space.empty() ? nullptr : file->space.c_str(),
                                 file->lower_case);
}

// The normalizers, pre-tokenizers or decoders of an HF_TOKENIZER vocabulary.
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::HfStep>>> build_hf_steps(
    flatbuffers::FlatBufferBuilder& fbb, const std::vector<HfStepSpec>& steps) {
  std::vector<flatbuffers::Offset<fb::HfStep>> out;
  for (const HfStepSpec& s : steps) {
    const std::vector<uint8_t> charsmap(s.precompiled_charsmap.begin(), s.precompiled_charsmap.end());
    out.push_back(fb::CreateHfStepDirect(fbb, s.kind, s.pattern.c_str(), s.pattern_is_regex, s.content.c_str(),
                                         s.behavior, s.invert, s.add_prefix_space, s.use_regex, s.prepend_scheme,
                                         s.split, s.individual_digits, s.left, s.right, s.start, s.stop,
                                         charsmap.empty() ? nullptr : &charsmap));
  }
  return fbb.CreateVector(out);
}

// The HfTokenizer table of an HF_TOKENIZER vocabulary; 0 (absent) for the other kinds.
flatbuffers::Offset<fb::HfTokenizer> build_hf_tokenizer(flatbuffers::FlatBufferBuilder& fbb,
                                                        const HfTokenizerJson* t) {
  if (t == nullptr) return 0;
  std::vector<flatbuffers::Offset<flatbuffers::String>> pieces;
  pieces.reserve(t->pieces.size());
  for (const std::string& p : t->pieces) pieces.push_back(fbb.CreateString(p));
  const auto normalizers = build_hf_steps(fbb, t->normalizers);
  const auto pre_tokenizers = build_hf_steps(fbb, t->pre_tokenizers);
  const auto decoders = build_hf_steps(fbb, t->decoders);
  std::vector<flatbuffers::Offset<fb::HfAddedToken>> added;
  for (const HfAddedTokenSpec& a : t->added_tokens)
    added.push_back(fb::CreateHfAddedTokenDirect(fbb, a.id, a.content.c_str(), a.special, a.single_word, a.lstrip,
                                                 a.rstrip, a.normalized));
  const auto pieces_vec = fbb.CreateVector(pieces);
  const auto merges = fbb.CreateVector(t->merges);
  const auto scores = fbb.CreateVector(t->scores);
  const auto prefix = fbb.CreateString(t->continuing_subword_prefix);
  const auto suffix = fbb.CreateString(t->end_of_word_suffix);
  const auto added_vec = fbb.CreateVector(added);
  const auto prefix_ids = fbb.CreateVector(t->prefix_ids);
  const auto suffix_ids = fbb.CreateVector(t->suffix_ids);
  return fb::CreateHfTokenizer(fbb, t->model, pieces_vec, merges, scores, t->unk_id, t->byte_fallback,
                               t->ignore_merges, t->fuse_unk, prefix, suffix, normalizers, pre_tokenizers, decoders,
                               added_vec, prefix_ids, suffix_ids);
}

}  // namespace

flatbuffers::Offset<fb::Vocabulary> build_vocabulary(flatbuffers::FlatBufferBuilder& fbb, const ModelMetadata& m) {
  return fb::CreateVocabularyDirect(fbb, m.vocab_kind, m.vocab_size, m.vocab_note.c_str(), m.byte_offset,
                                    build_sentencepiece(fbb, m.sentencepiece.get()),
                                    build_symbols(fbb, m.symbols.get()), m.bos_id, m.eos_id, m.unk_id, m.pad_id,
                                    m.extra_eos_ids.empty() ? nullptr : &m.extra_eos_ids, m.add_bos,
                                    build_hf_tokenizer(fbb, m.hf_tokenizer.get()));
}

}  // namespace tern::convert
