// SPDX-License-Identifier: MIT
#include "text/hf_bpe.h"

#include <algorithm>

#include "text/hf_utf8.h"

namespace tern {
namespace {

// The heap's order: std::push_heap keeps the greatest on top, so "less" is "merges later".
bool merges_later(const HfBpe::Scratch::Candidate& a, const HfBpe::Scratch::Candidate& b) {
  if (a.rank != b.rank) return a.rank > b.rank;
  return a.position > b.position;
}

}  // namespace

Result<HfBpe> HfBpe::create(const fb::HfTokenizer& table, const HfVocab* vocab) {
  HfBpe bpe;
  bpe.vocab_ = vocab;
  const int64_t vocab_size = int64_t(vocab->pieces.size());
  const auto is_token = [&](int32_t id) { return id >= 0 && id < vocab_size && !vocab->pieces[size_t(id)].empty(); };
  if (const auto* merges = table.merges()) {
    if (merges->size() % 3 != 0) {
      return InvalidModel("vocabulary: hf_tokenizer.merges has " + std::to_string(merges->size()) +
                          " ids, not a multiple of 3 (left, right, merged)");
    }
    const uint32_t count = merges->size() / 3;
    size_t slots = 2;
    while (slots < 2 * size_t(count)) slots *= 2;
    bpe.merge_slots_.assign(slots, MergeSlot{kNoPair, Merge{0, 0}});
    bpe.merge_shift_ = 64 - __builtin_ctzll(slots);
    for (uint32_t rank = 0; rank < count; ++rank) {
      const int32_t left = merges->Get(3 * rank), right = merges->Get(3 * rank + 1), merged = merges->Get(3 * rank + 2);
      if (!is_token(left) || !is_token(right) || !is_token(merged)) {
        return InvalidModel("vocabulary: hf_tokenizer.merges entry " + std::to_string(rank) + " (" +
                            std::to_string(left) + ", " + std::to_string(right) + " -> " + std::to_string(merged) +
                            ") names an id that is not a model token");
      }
      // A pair listed twice keeps its last rank and token, as the reference's map collected from the list does.
      bpe.insert_merge(pair_key(left, right), Merge{rank, merged});
    }
  }
  if (bpe.merge_slots_.empty()) {  // no merges: two empty slots keep the lookup's loop valid
    bpe.merge_slots_.assign(2, MergeSlot{kNoPair, Merge{0, 0}});
    bpe.merge_shift_ = 63;
  }
  bpe.unk_id_ = table.unk_id();
  if (bpe.unk_id_ != -1 && !is_token(bpe.unk_id_)) {
    return InvalidModel("vocabulary: hf_tokenizer.unk_id " + std::to_string(bpe.unk_id_) +
                        " is not a model token (nor -1)");
  }
  const auto view = [](const flatbuffers::String* s) {
    return s ? std::string_view(s->data(), s->size()) : std::string_view();
  };
  bpe.prefix_ = view(table.continuing_subword_prefix());
  bpe.suffix_ = view(table.end_of_word_suffix());
  if (bpe.prefix_.size() > 256 || bpe.suffix_.size() > 256) {
    return InvalidModel(
        "vocabulary: hf_tokenizer.continuing_subword_prefix or end_of_word_suffix is longer than 256 bytes");
  }
  bpe.byte_fallback_ = table.byte_fallback();
  bpe.ignore_merges_ = table.ignore_merges();
  bpe.fuse_unk_ = table.fuse_unk();
  hf_byte_piece_ids(*vocab, bpe.byte_ids_);
  bpe.short_char_ids_.assign(0x800, -1);
  std::string utf8;
  for (char32_t c = 0; c < 0x800; ++c) {
    utf8.clear();
    if (c < 0x80) {
      utf8 += char(c);
    } else {
      utf8 += char(0xC0 | (c >> 6));
      utf8 += char(0x80 | (c & 0x3F));
    }
    bpe.short_char_ids_[c] = vocab->find(utf8);
  }
  return bpe;
}

void HfBpe::insert_merge(uint64_t key, Merge merge) {
  for (size_t i = slot_of(key);; i = (i + 1) & (merge_slots_.size() - 1)) {
    MergeSlot& slot = merge_slots_[i];
    if (slot.key == kNoPair || slot.key == key) {
      slot = MergeSlot{key, merge};
      return;
    }
  }
}

int32_t HfBpe::find_char(std::string_view key) const {
  const auto b0 = uint8_t(key[0]);
  if (key.size() == 1) return b0 < 0x80 ? short_char_ids_[b0] : vocab_->find(key);
  if (key.size() == 2 && (b0 & 0xE0) == 0xC0) {
    const auto b1 = uint8_t(key[1]);
    if ((b1 & 0xC0) == 0x80 && b0 >= 0xC2) return short_char_ids_[((b0 & 0x1F) << 6) | (b1 & 0x3F)];
  }
  return vocab_->find(key);
}

void HfBpe::add_symbol(Scratch* scratch, int32_t id, uint32_t length) const {
  auto& symbols = scratch->symbols;
  const int32_t index = int32_t(symbols.size());
  if (index > 0) symbols.back().next = index;
  symbols.push_back({id, index - 1, -1, length});
}

void HfBpe::encode_word(std::string_view word, Scratch* scratch, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = vocab_->find(word);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  scratch->symbols.clear();
  // The pending unknown token (fuse_unk grows it); -1: none. It is flushed before the next known character, but
  // not before byte-fallback tokens: those go in first, as the reference's loop has it.
  int32_t unk = -1;
  uint32_t unk_length = 0;
  for (size_t start = 0; start < word.size();) {
    const size_t length = hf_char_length(word, start);
    const bool first = start == 0, last = start + length == word.size();
    std::string_view key = word.substr(start, length);
    if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
      scratch->key.clear();
      if (!first) scratch->key += prefix_;
      scratch->key += key;
      if (last) scratch->key += suffix_;
      key = scratch->key;
    }
    start += length;
    const int32_t id = key.size() == length ? find_char(key) : vocab_->find(key);
    if (id >= 0) {
      if (unk >= 0) {
        add_symbol(scratch, unk, unk_length);
        unk = -1;
      }
      add_symbol(scratch, id, uint32_t(length));
      continue;
    }
    if (byte_fallback_ && std::all_of(key.begin(), key.end(), [&](char b) { return byte_ids_[uint8_t(b)] >= 0; })) {
      for (char b : key) add_symbol(scratch, byte_ids_[uint8_t(b)], 1);
      continue;
    }
    if (unk_id_ < 0) continue;  // no unknown token: the character is dropped
    if (unk >= 0 && fuse_unk_) {
      unk_length += uint32_t(length);
    } else {
      if (unk >= 0) add_symbol(scratch, unk, unk_length);
      unk = unk_id_;
      unk_length = uint32_t(length);
    }
  }
  if (unk >= 0) add_symbol(scratch, unk, unk_length);
  merge_all(scratch);
  for (const Scratch::Symbol& s : scratch->symbols)
    if (s.length != 0) ids->push_back(s.id);
}

void HfBpe::merge_all(Scratch* scratch) const {
  auto& symbols = scratch->symbols;
  auto& queue = scratch->queue;
  queue.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id))
      queue.push_back({m->rank, uint32_t(i), m->merged});
  }
  std::make_heap(queue.begin(), queue.end(), merges_later);
  const auto push = [&](const Merge* m, int32_t position) {
    queue.push_back({m->rank, uint32_t(position), m->merged});
    std::push_heap(queue.begin(), queue.end(), merges_later);
  };
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), merges_later);
    const Scratch::Candidate top = queue.back();
    queue.pop_back();
    Scratch::Symbol& current = symbols[top.position];
    if (current.length == 0 || current.next == -1) continue;
    const int32_t right_index = current.next;
    const Scratch::Symbol right = symbols[size_t(right_index)];
    const Merge* now = find_merge(current.id, right.id);
    if (now == nullptr || now->merged != top.merged) continue;  // stale: this pair no longer merges so
    current.id = top.merged;
    current.length += right.length;
    current.next = right.next;
    symbols[size_t(right_index)].length = 0;
    if (right.next >= 0) symbols[size_t(right.next)].prev = int32_t(top.position);
    if (current.prev >= 0) {
      if (const Merge* m = find_merge(symbols[size_t(current.prev)].id, current.id)) push(m, current.prev);
    }
    if (current.next >= 0) {
      if (const Merge* m = find_merge(current.id, symbols[size_t(current.next)].id)) push(m, int32_t(top.position));
    }
  }
}

}  // namespace tern
