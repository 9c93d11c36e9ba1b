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
// Memory: the merge map holds one entry per distinct pair of hf_tokenizer.merges; a word costs O(its bytes) in the
// caller's scratch buffers, reused from word to word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
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
  static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
  const Merge* find_merge(int32_t left, int32_t right) const {
    auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  }
  void add_symbol(Scratch* scratch, int32_t id, uint32_t length) const;
  void merge_all(Scratch* scratch) const;

  const HfVocab* vocab_ = nullptr;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank (index in the file), merged id
  int32_t byte_ids_[256];
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false, ignore_merges_ = false, fuse_unk_ = false;
  std::string_view prefix_, suffix_;
};

}  // namespace tern
