// SPDX-License-Identifier: MIT
// Fuzz target: a tokenizer file and a text. The input is <tokenizer file><kTextMarker><text> (the text after the
// last marker; no marker: no text). A file starting with '{' is a tokenizer.json, anything else a SentencePiece
// .model. The converter reads it as --tokenizer does (attach_tokenizer) into a model's vocabulary: a .model's
// vocabulary is as wide as its pieces (counted on the wire, so the count check passes and the pieces are read), a
// tokenizer.json's kHfVocabSize. What it accepts is written as a model file's Vocabulary table and built into the
// runtime tokenizer, which encodes the text (with and without special tokens split out) and decodes the ids back.
// An id outside the vocabulary traps; every other failure must be a status.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "proto_wire.h"
#include "text/tokenizer.h"
#include "tokenizer_file.h"
#include "vocabulary_table.h"

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kTextMarker = "\n#TEXT#\n";
constexpr int64_t kHfVocabSize = 512;  // the seeds' ids are below it; wider files are refused, which is fuzzed too

// A private directory per process for the tokenizer file, removed at exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char tmpl[] = "/tmp/tern-fuzz-tokenizer-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// ModelProto.pieces (field 1) entries; 0 when the bytes are not a well-formed message.
int64_t count_pieces(std::string_view model) {
  int64_t pieces = 0;
  const tern::Status st =
      tern::convert::for_each_proto_field(model, "ModelProto", [&](const tern::convert::ProtoField& f) {
        pieces += f.number == 1;
        return tern::Status::Ok();
      });
  return st.ok() ? pieces : 0;
}

void check_ids(const std::vector<int32_t>& ids, int64_t vocab_size) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      std::fprintf(stderr, "id %d outside the vocabulary of %lld\n", id, static_cast<long long>(vocab_size));
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ScratchDir scratch;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t marker = input.rfind(kTextMarker);
  const std::string_view file = input.substr(0, marker);
  const std::string_view text =
      marker == std::string_view::npos ? std::string_view() : input.substr(marker + kTextMarker.size());
  const bool json = !file.empty() && file.front() == '{';
  const std::string path = scratch.path + (json ? "/tokenizer.json" : "/tokenizer.model");
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(file.data(), std::streamsize(file.size()));
  }

  tern::convert::ModelMetadata metadata;
  metadata.vocab_kind = tern::fb::VocabKind::EXTERNAL;
  metadata.vocab_size = json ? kHfVocabSize : count_pieces(file);
  tern::convert::TokenizerChoice choice;
  choice.path = path;
  std::string used;
  if (!tern::convert::attach_tokenizer(scratch.path, choice, &metadata, &used).ok()) return 0;

  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(tern::convert::build_vocabulary(fbb, metadata));
  const auto* vocabulary = flatbuffers::GetRoot<tern::fb::Vocabulary>(fbb.GetBufferPointer());
  // A file the converter reads but the runtime refuses is caught by the writer's verification at conversion: a
  // status, not a crash.
  auto tokenizer = tern::Tokenizer::from_vocabulary(vocabulary, metadata.vocab_size);
  if (!tokenizer.ok() || tokenizer.value() == nullptr) return 0;
  const tern::Tokenizer& t = *tokenizer.value();
  for (const bool specials_as_text : {false, true}) {
    std::vector<int32_t> ids;
    if (!t.encode(text, /*add_special=*/true, specials_as_text, &ids).ok()) continue;
    check_ids(ids, metadata.vocab_size);
    const std::string decoded = t.decode(ids.data(), ids.size());
    for (int32_t id : ids) (void)t.piece_text(id);
    (void)decoded;
  }
  return 0;
}
