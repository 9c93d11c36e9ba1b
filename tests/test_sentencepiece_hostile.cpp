// SPDX-License-Identifier: MIT
// SentencePiece data from a hostile or broken model file: SentencePieceTokenizer::create refuses what is wrong with
// a message naming it, and what it accepts (any charsmap bytes behind a consistent header) encodes any text without
// reading out of bounds (run under build-asan too); the converter's reader refuses files and settings it cannot
// reproduce exactly.
#include <sentencepiece_trainer.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <limits>
#include <tuple>

#include "sentencepiece_corpus.h"
#include "sentencepiece_file.h"
#include "test_support.h"
#include "text/sentencepiece.h"
#include "text/token_limits.h"

using tern::PieceType;
using tern::SentencePieceSpec;
using tern::SentencePieceTokenizer;

namespace {

// <unk> <s> </s> ▁ a b ▁a ab
SentencePieceSpec small_spec() {
  SentencePieceSpec s;
  s.pieces = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"};
  s.scores = {0, 0, 0, -1, -2, -3, -1.5f, -2.5f};
  s.types = {PieceType::kUnknown, PieceType::kControl, PieceType::kControl, PieceType::kNormal,
             PieceType::kNormal,  PieceType::kNormal,  PieceType::kNormal,  PieceType::kNormal};
  return s;
}

void require_invalid(const SentencePieceSpec& spec, const std::string& message_part) {
  auto t = SentencePieceTokenizer::create(spec);
  INFO("expected a message with '" << message_part << "', got '" << t.status().message() << "'");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == TERN_INVALID_MODEL);
  CHECK(t.status().message().find(message_part) != std::string::npos);
}

const std::vector<std::string>& hostile_lines() {
  static const std::vector<std::string> lines = [] {
    auto base = tern::test::kjv_heldout_lines();
    base.resize(200);
    return tern::test::sentencepiece_test_lines(base, 600, 99);
  }();
  return lines;
}

// Encodes every hostile line; the ids must be in range and decode without failing. A garbage charsmap may expand a
// line past the normalizer's limit: that is the one error allowed.
void encode_all(const SentencePieceTokenizer& t) {
  std::vector<int32_t> ids;
  size_t total = 0, out_of_range = 0;
  for (const auto& line : hostile_lines()) {
    if (const tern::Status st = t.encode(line, &ids); !st.ok()) {
      CHECK(st.message().find("normalizing the text") != std::string::npos);
      continue;
    }
    for (int32_t id : ids) out_of_range += id < 0 || size_t(id) >= t.size();
    if (out_of_range == 0) total += t.decode(ids.data(), ids.size()).size();
  }
  CHECK(out_of_range == 0);
  CHECK(total > 0);
}

std::string charsmap_blob(const std::string& units, const std::string& pool) {
  const uint32_t n = uint32_t(units.size());
  std::string blob(4, '\0');
  for (int i = 0; i < 4; ++i) blob[size_t(i)] = char((n >> (8 * i)) & 0xFF);
  return blob + units + pool;
}

// A small trained unigram model (nmt_nfkc), for its real charsmap and for the converter's refusals.
std::string trained_model_path() {
  static const std::string path = [] {
    const std::string dir = tern::test::scratch_dir("sentencepiece_hostile");
    const std::string input = dir + "/train.txt";
    std::string text;
    for (const auto& l : tern::test::kjv_heldout_lines()) text += l + "\n";
    tern::test::write_file(input, text);
    const auto st = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + input + " --model_prefix=" + dir + "/m --vocab_size=300 --hard_vocab_limit=false"
        " --num_threads=2 --minloglevel=2");
    REQUIRE(st.ok());
    return dir + "/m.model";
  }();
  return path;
}

}  // namespace

TEST_CASE("sentencepiece create refuses inconsistent pieces with a message naming them") {
  REQUIRE(SentencePieceTokenizer::create(small_spec()).ok());
  SentencePieceSpec s = small_spec();
  s.scores.pop_back();
  require_invalid(s, "8 pieces but 7 scores and 8 types");
  s = small_spec();
  s.pieces[4] = "";
  require_invalid(s, "sentencepiece piece 4 is empty");
  s = small_spec();
  s.pieces[5] = "a";
  require_invalid(s, "sentencepiece piece 5 repeats piece 4");
  s = small_spec();
  s.pieces[5] = std::string_view("x\0y", 3);
  require_invalid(s, "piece 5 holds a NUL byte");
  s = small_spec();
  s.scores[6] = std::numeric_limits<float>::quiet_NaN();
  require_invalid(s, "piece 6's score is not finite");
  s = small_spec();
  s.scores[6] = std::numeric_limits<float>::infinity();
  require_invalid(s, "piece 6's score is not finite");
  s = small_spec();
  s.types[0] = PieceType::kNormal;
  require_invalid(s, "(unk_id) is not an unknown piece");
  s = small_spec();
  s.types[4] = PieceType::kUnknown;
  require_invalid(s, "piece 4 is an unknown piece but unk_id is 0");
  s = small_spec();
  s.unk_id = 8;
  require_invalid(s, "unk_id 8 is outside the 8 pieces");
  s = small_spec();
  s.unk_id = -1;
  require_invalid(s, "unk_id -1 is outside");
  s = small_spec();
  s.types[5] = PieceType(9);
  require_invalid(s, "piece 5 has type 9");
  s = small_spec();
  s.types[5] = PieceType::kByte;
  require_invalid(s, "piece 5 is a byte piece but byte_fallback is off");
  s = small_spec();
  s.byte_fallback = true;
  require_invalid(s, "byte_fallback but no byte piece <0x00>");
  s = small_spec();
  s.byte_fallback = true;
  s.pieces[5] = "<0x4g>";
  s.types[5] = PieceType::kByte;
  require_invalid(s, "piece 5 is a byte piece not spelled <0xNN>");
  s = SentencePieceSpec();
  require_invalid(s, "no pieces");
  s = small_spec();
  for (size_t i = 3; i < s.types.size(); ++i) s.types[i] = PieceType::kControl;
  require_invalid(s, "unigram model has no normal, user-defined or unused piece");
  s.bpe = true;                // BPE needs no piece to merge into
  s.add_dummy_prefix = false;  // U+2581 is a control piece here too
  auto bpe = SentencePieceTokenizer::create(s);
  REQUIRE(bpe.ok());
  std::vector<int32_t> ids;
  REQUIRE(bpe->encode("xyzx", &ids).ok());
  CHECK(ids == std::vector<int32_t>{0});  // one run of unknown pieces
  // A one-character control piece is a symbol that covers no text: libsentencepiece fails the whole encoding.
  REQUIRE(bpe->encode("xa", &ids).ok());
  CHECK(ids.empty());
}

TEST_CASE("sentencepiece create refuses a charsmap whose header does not fit") {
  SentencePieceSpec s = small_spec();
  const std::string three = "abc";
  s.precompiled_charsmap = three;
  require_invalid(s, "precompiled_charsmap holds 3 bytes");
  const std::string four(4, '\0');
  s.precompiled_charsmap = four;
  require_invalid(s, "precompiled_charsmap holds 4 bytes");
  std::string past = charsmap_blob(std::string(16, 'x'), "pool");
  past[0] = char(40);  // 40 trie bytes claimed, 20 there
  s.precompiled_charsmap = past;
  require_invalid(s, "trie size 40 runs past its 20 bytes");
}

TEST_CASE("sentencepiece garbage charsmaps behind a valid header encode any text in bounds") {
  const auto random = tern::test::random_ids(1 << 16, 256, 5);
  std::vector<std::string> blobs;
  for (size_t units : {0, 1, 2, 7, 64, 1024}) {
    for (int pool_kind = 0; pool_kind < 3; ++pool_kind) {
      std::string trie;
      for (size_t i = 0; i < units * 4; ++i) trie += char(random[(i * 7 + units + size_t(pool_kind)) % random.size()]);
      // Units that point far outside the array, and leaf units whose values lie past the pool.
      if (pool_kind == 1) {
        for (size_t i = 0; i + 4 <= trie.size(); i += 8) std::memset(&trie[i], 0xFF, 4);
      }
      const std::string pool = pool_kind == 2 ? std::string() : std::string("x\0yy\0zzz", 8) + "no terminator";
      blobs.push_back(charsmap_blob(trie, pool));
    }
  }
  // A real charsmap with bytes flipped, and with its trie cut short (the header kept consistent).
  auto file = tern::convert::read_sentencepiece_file(trained_model_path());
  REQUIRE(file.ok());
  const std::string& real = file->precompiled_charsmap;
  REQUIRE(real.size() > 1000);
  for (size_t k = 0; k < 8; ++k) {
    std::string flipped = real;
    for (size_t i = 4 + k; i < flipped.size(); i += 97 + k) flipped[i] = char(random[i % random.size()]);
    blobs.push_back(flipped);
  }
  blobs.push_back(charsmap_blob(real.substr(4, 4000), real.substr(4 + 4000)));
  size_t refused = 0;
  for (const auto& blob : blobs) {
    if (blob.size() <= 4) continue;  // no room for a trie: refused above
    tern::convert::SentencePieceFile f = file.value();
    f.precompiled_charsmap = blob;
    auto t = SentencePieceTokenizer::create(f.spec());
    if (!t.ok()) {  // a run of pool bytes longer than any replacement may be
      CHECK(t.status().message().find("a normalization rule may write at most") != std::string::npos);
      ++refused;
      continue;
    }
    encode_all(t.value());
  }
  CHECK(refused < blobs.size() / 2);  // most garbage still loads: the encoding above is what this test checks
}

TEST_CASE("sentencepiece long chains of unused BPE pieces resegment without recursion") {
  // a, aa, aaa, ... up to the longest piece allowed: all unused but the single letter, so merging builds one long
  // piece and splitting it back goes kMaxPieceBytes levels deep.
  const size_t longest = tern::kMaxPieceBytes;
  std::vector<std::string> storage = {"<unk>"};
  for (size_t n = 1; n <= longest; ++n) storage.push_back(std::string(n, 'a'));
  SentencePieceSpec s;
  s.bpe = true;
  for (size_t i = 0; i < storage.size(); ++i) {
    s.pieces.push_back(storage[i]);
    s.scores.push_back(float(i));
    s.types.push_back(i == 0 ? PieceType::kUnknown : i == 1 ? PieceType::kNormal : PieceType::kUnused);
  }
  s.add_dummy_prefix = false;
  auto t = SentencePieceTokenizer::create(s);
  REQUIRE(t.ok());
  std::vector<int32_t> ids;
  REQUIRE(t->encode(std::string(longest, 'a'), &ids).ok());
  CHECK(ids == std::vector<int32_t>(longest, 1));
}

TEST_CASE("sentencepiece files the converter cannot reproduce exactly are refused naming the setting") {
  const std::string path = trained_model_path();
  const std::string model = tern::test::read_file(path);
  const std::string dir = tern::test::scratch_dir("sentencepiece_refused");
  auto read_variant = [&](const std::string& name, const std::string& bytes) {
    tern::test::write_file(dir + "/" + name, bytes);
    return tern::convert::read_sentencepiece_file(dir + "/" + name);
  };
  auto expect_error = [](const auto& result, tern_status code, const std::string& part) {
    INFO("expected '" << part << "' in '" << result.status().message() << "'");
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == code);
    CHECK(result.status().message().find(part) != std::string::npos);
  };
  REQUIRE(tern::convert::read_sentencepiece_file(path).ok());
  expect_error(tern::convert::read_sentencepiece_file(dir + "/absent.model"), TERN_IO_ERROR, "cannot open");
  expect_error(tern::convert::read_sentencepiece_file(dir), TERN_IO_ERROR, "not a regular file");
  expect_error(read_variant("garbage.model", std::string("\xff\xff\xff\xff garbage", 12)), TERN_INVALID_ARGUMENT,
               "is not a SentencePiece model libsentencepiece loads");
  expect_error(read_variant("cut.model", model.substr(0, model.size() / 2)), TERN_INVALID_ARGUMENT,
               "is not a SentencePiece model");
  // Fields appended to the file merge into its trainer_spec (field 2) or set a denormalizer_spec (field 5).
  expect_error(read_variant("word.model", model + std::string("\x12\x02\x18\x03", 4)), TERN_UNSUPPORTED,
               "model_type WORD is not supported");
  expect_error(read_variant("char.model", model + std::string("\x12\x02\x18\x04", 4)), TERN_UNSUPPORTED,
               "model_type CHAR");
  expect_error(read_variant("unk_surface.model", model + std::string("\x12\x05\xe2\x02\x02?!", 7)),
               TERN_UNSUPPORTED, "trainer_spec.unk_surface '?!'");
  // The file's own precompiled_charsmap as a denormalizer's.
  auto file = tern::convert::read_sentencepiece_file(path);
  REQUIRE(file.ok());
  const std::string& charsmap = file->precompiled_charsmap;
  REQUIRE(charsmap.size() < (1u << 21));
  const auto varint = tern::test::proto_varint;
  const std::string denormalizer_spec = "\x12" + varint(charsmap.size()) + charsmap;
  expect_error(read_variant("denormalizer.model", model + "\x2a" + varint(denormalizer_spec.size()) + denormalizer_spec),
               TERN_UNSUPPORTED, "a denormalizer_spec with a precompiled_charsmap");
  // The default unk_surface given explicitly is fine, and so is an empty denormalizer_spec.
  CHECK(read_variant("unk_default.model", model + std::string("\x12\x08\xe2\x02\x05 \xe2\x81\x87 ", 10)).ok());
  CHECK(read_variant("empty_denormalizer.model", model + std::string("\x2a\x00", 2)).ok());
}

TEST_CASE("sentencepiece pieces are at most kMaxPieceBytes long, in the runtime and in the converter") {
  SentencePieceSpec s = small_spec();
  const std::string longest(tern::kMaxPieceBytes, 'a'), too_long(tern::kMaxPieceBytes + 1, 'b');
  s.pieces[7] = too_long;
  require_invalid(s, "sentencepiece piece 7 is 1025 bytes long; a token may be at most 1024 bytes");
  s.pieces[7] = longest;
  CHECK(SentencePieceTokenizer::create(s).ok());
  // The converter measures the pieces on the wire format before libsentencepiece builds its trie from them.
  const std::string dir = tern::test::scratch_dir("sentencepiece_piece_length");
  tern::test::write_file(dir + "/long.model", tern::test::sentencepiece_model_proto({"a", std::string(120000, 'c')}));
  auto file = tern::convert::read_sentencepiece_file(dir + "/long.model");
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == TERN_INVALID_ARGUMENT);
  CHECK_THAT(file.status().message(), Catch::Contains("long.model': piece 4 is 120000 bytes long"));
  tern::test::write_file(dir + "/longest.model", tern::test::sentencepiece_model_proto({"a", longest}));
  file = tern::convert::read_sentencepiece_file(dir + "/longest.model");
  REQUIRE(file.ok());
  CHECK(file->pieces[4] == longest);
  // libsentencepiece's trie builder throws on an empty key, which a piece starting with a NUL is to it (fuzz).
  const std::tuple<const char*, std::string, const char*> bad_pieces[] = {
      {"nul.model", std::string("\0b", 2), "piece 4 holds a NUL byte"}, {"empty.model", "", "piece 4 is empty"}};
  for (const auto& [name, piece, message] : bad_pieces) {
    tern::test::write_file(dir + "/" + name, tern::test::sentencepiece_model_proto({"a", piece}));
    file = tern::convert::read_sentencepiece_file(dir + "/" + name);
    REQUIRE_FALSE(file.ok());
    CHECK_THAT(file.status().message(), Catch::Contains(std::string(name) + "': " + message));
  }
  // The count is compared before libsentencepiece reads the pieces, too.
  file = tern::convert::read_sentencepiece_file(dir + "/longest.model", 4, "; a note");
  REQUIRE_FALSE(file.ok());
  CHECK_THAT(file.status().message(),
             Catch::Contains("holds 5 pieces; the model's vocabulary has 4 tokens (the width of its logits); a note"));
}

// Pieces of every length up to the limit over one letter: the longest-match trie walks of unigram segmentation (and
// of user-defined matching in the normalizer, and BPE's merges) meet the longest piece at every position.
TEST_CASE("sentencepiece segmentation of a long text against the longest pieces is linear") {
  const std::string text(64 * 1024, 'a');
  std::vector<std::string> storage = {"<unk>", std::string(tern::kMaxPieceBytes, 'a'), "a"};
  for (const PieceType long_type : {PieceType::kNormal, PieceType::kUserDefined}) {
    for (const bool bpe : {false, true}) {
      SentencePieceSpec s;
      s.bpe = bpe;
      s.pieces.assign(storage.begin(), storage.end());
      s.scores = {0.0f, -1.0f, -1.0f};
      s.types = {PieceType::kUnknown, long_type, PieceType::kNormal};
      s.add_dummy_prefix = false;
      auto t = SentencePieceTokenizer::create(s);
      REQUIRE(t.ok());
      std::vector<int32_t> ids;
      const auto start = std::chrono::steady_clock::now();
      REQUIRE(t->encode(text, &ids).ok());
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      INFO("bpe " << bpe << ", long piece type " << int(long_type) << ": " << seconds << " s");
      CHECK(seconds < 10.0);  // a hang, not a speed check: quadratic walks took minutes
      // The user-defined piece is cut greedily, the normal one chosen by score: both cover the text with it where
      // they can; BPE has no merge path to the long piece, so only the user-defined one appears there.
      size_t long_ids = 0, short_ids = 0;
      for (int32_t id : ids) (id == 1 ? long_ids : short_ids) += 1;
      CHECK(long_ids * tern::kMaxPieceBytes + short_ids == text.size());
      if (long_type == PieceType::kUserDefined || !bpe) CHECK(long_ids == text.size() / tern::kMaxPieceBytes);
    }
  }
}

namespace {

// A charsmap of one rule, 'a' -> `replacement`: the root's children at offset 1, 'a''s node at 1 ^ 'a' with a leaf
// whose value unit (offset 1 on) points at pool offset 0 (PrecompiledCharsMap's unit layout).
std::string one_rule_charsmap(const std::string& replacement) {
  std::vector<uint32_t> units(98, 0);
  units[0] = 1u << 10;
  const size_t node = 1 ^ 'a';
  units[node] = uint32_t('a') | (1u << 8) | (1u << 10);
  units[node ^ 1] = 0x80000000u;
  std::string trie(units.size() * 4, '\0');
  std::memcpy(&trie[0], units.data(), trie.size());  // little-endian, as the format stores it
  return charsmap_blob(trie, replacement + std::string(1, '\0'));
}

}  // namespace

TEST_CASE("sentencepiece charsmap replacements are bounded at load, the normalized text while encoding") {
  SentencePieceSpec s = small_spec();
  s.add_dummy_prefix = false;
  const std::string too_long = one_rule_charsmap(std::string(tern::kMaxReplacementBytes + 1, 'b'));
  s.precompiled_charsmap = too_long;
  require_invalid(s, "replacement at pool offset 0 is 129 bytes long; a normalization rule may write at most 128");
  // The longest replacement allowed, 128 times the text: a 20-byte prompt once became 1.25 GB this way.
  const std::string longest = one_rule_charsmap(std::string(tern::kMaxReplacementBytes, 'b'));
  s.precompiled_charsmap = longest;
  auto t = SentencePieceTokenizer::create(s);
  REQUIRE(t.ok());
  std::vector<int32_t> ids;
  REQUIRE(t->encode("a", &ids).ok());  // 128 b's: within the slack every text has
  CHECK(ids.size() == 128);            // b is a piece: one id each
  const tern::Status st = t->encode(std::string(1000, 'a'), &ids);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == TERN_INVALID_ARGUMENT);
  CHECK_THAT(st.message(), Catch::Contains("normalizing the text (1000 bytes) makes more than 16128 bytes"));
  CHECK(ids.empty());
  REQUIRE(t->encode("bab", &ids).ok());  // other text is untouched
  CHECK(ids.size() == 130);
}
