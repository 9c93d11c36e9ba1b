// SPDX-License-Identifier: MIT
// Text for the SentencePiece tests: training lines, and a deterministic set of test lines that reach every branch
// of normalization and segmentation (case, whitespace runs, full-width forms, ligatures, combining and precomposed
// accents, CJK, emoji, zero-width and control characters, NBSP, malformed and truncated UTF-8, empty and very long
// lines, raw bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tern::test {

// Lines of examples/models/kjv-byte/heldout.txt.
std::vector<std::string> kjv_heldout_lines();
// A few lines of other scripts (accents, Greek, Cyrillic, CJK, emoji, full-width forms) to train on beside the KJV.
std::vector<std::string> unicode_training_lines();
// `count` test lines made from `base` by a PRNG seeded with `seed`: the base lines themselves first, then variants.
std::vector<std::string> sentencepiece_test_lines(const std::vector<std::string>& base, size_t count, uint64_t seed);

// A protobuf varint.
std::string proto_varint(uint64_t value);
// A SentencePiece .model (a serialized ModelProto) written field by field, for models no trainer makes: <unk>, <s>,
// </s>, then `pieces` as normal pieces with descending scores; unigram, the identity normalizer, other fields at
// their defaults.
std::string sentencepiece_model_proto(const std::vector<std::string>& pieces);

}  // namespace tern::test
