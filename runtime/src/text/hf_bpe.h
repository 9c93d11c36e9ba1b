// SPDX-License-Identifier: MIT
// The BPE model of a tokenizer.json (tokenizers 0.23, models/bpe/model.rs and word.rs), one pre-tokenized word at a
// time, without dropout:
//   1. ignore_merges: a word that is a token is that token;
//   2. the word's characters become symbols, each looked up with continuing_subword_prefix in front (all but the
//      first) and end_of_word_suffix behind (the last); a character with no token becomes its (prefixed, suffixed)
//      bytes' <0xNN> tokens when byte_fallback and all of them exist, else the unknown token (consecutive ones one
//      token with fuse_unk), else nothing (no unk_id: the character is dropped, as the reference drops it);
//   3. merges apply lowest rank first, ties to the leftmost, from a priority queue whose entries go stale as symbols
//      merge: an entry is skipped when its symbol was absorbed, has no right neighbour, or the pair there now merges
//      into a different token (an entry whose pair changed but still merges into the same token is applied: the
//      reference's check compares merged ids only).
// Memory: the merge map holds 2 to 4 slots of 16 bytes per entry of hf_tokenizer.merges; a word costs O(its bytes) in the
// caller's scratch buffers, reused from word to word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "format/status.h"
#include "tern_generated.h"
#include "text/hf_vocab.h"

namespace tern {

class HfBpe {
 public:
  // Buffers one encode call reuses for all its words.
  struct Scratch {
    struct Symbol {
      int32_t id;
      int32_t prev, next;  // neighbours' indexes, -1 at the ends
      uint32_t length;     // bytes of the word it covers; 0 once merged into its left neighbour
    };
    struct Candidate {
      uint32_t rank;
      uint32_t position;
      int32_t merged;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> queue;  // a heap: lowest rank, then lowest position, on top
    std::string key;
  };

  // `vocab` must outlive the model. Checks merges (a multiple of 3, ids in [0, vocab_size) naming model tokens),
  // unk_id (-1 or a model token) and the prefix / suffix lengths. Errors name the field.
  static Result<HfBpe> create(const fb::HfTokenizer& table, const HfVocab* vocab);

  // Appends the ids of one non-empty word (valid UTF-8, as the pipeline gives it).
  void encode_word(std::string_view word, Scratch* scratch, std::vector<int32_t>* ids) const;

 private:
  struct Merge {
    uint32_t rank;
    int32_t merged;
  };
  // The merge map, open addressing with linear probing over a power-of-two table at most half full: the lookup of
  // every adjacent pair is the encoder's hottest step. kNoPair marks an empty slot (no id pair has it: ids < 2^31).
  struct MergeSlot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kNoPair = ~uint64_t(0);
  static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
  size_t slot_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> merge_shift_); }
  const Merge* find_merge(int32_t left, int32_t right) const {
    const uint64_t key = pair_key(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & (merge_slots_.size() - 1)) {
      const MergeSlot& slot = merge_slots_[i];
      if (slot.key == key) return &slot.merge;
      if (slot.key == kNoPair) return nullptr;
    }
  }
  void insert_merge(uint64_t key, Merge merge);
  // The id of each one- or two-byte UTF-8 character's token ([U+0000, U+0800); -1: none), for words looked up without
  // prefix or suffix: byte-level alphabets and most scripts' letters skip the string map.
  int32_t find_char(std::string_view key) const;
  void add_symbol(Scratch* scratch, int32_t id, uint32_t length) const;
  void merge_all(Scratch* scratch) const;

  const HfVocab* vocab_ = nullptr;
  std::vector<MergeSlot> merge_slots_;  // (left id, right id) -> rank (index in the file), merged id
  int merge_shift_ = 63;  // 64 - log2(slots)
  std::vector<int32_t> short_char_ids_;  // [0x800]
  int32_t byte_ids_[256];
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false, ignore_merges_ = false, fuse_unk_ = false;
  std::string_view prefix_, suffix_;
};

}  // namespace tern
