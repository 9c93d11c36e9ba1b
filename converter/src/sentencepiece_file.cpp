// SPDX-License-Identifier: MIT
#include "sentencepiece_file.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <utility>

#include "format/input_file.h"
#include "proto_wire.h"
#include "text/token_limits.h"

namespace tern::convert {

namespace {

constexpr uint64_t kMaxModelBytes = uint64_t(64) << 20;  // real models are a few MiB (250k pieces: ~5 MiB)
constexpr std::string_view kDefaultUnknownSurface = " \xE2\x81\x87 ";

// sentencepiece_model.proto (v0.1.97) field numbers.
namespace field {
constexpr uint32_t kModelPieces = 1, kPiecePiece = 1, kPieceType = 3;
constexpr uint32_t kModelTrainerSpec = 2, kModelNormalizerSpec = 3, kModelDenormalizerSpec = 5;
constexpr uint32_t kTrainerModelType = 3, kTrainerTreatWhitespaceAsSuffix = 24, kTrainerByteFallback = 35,
                   kTrainerUnkSurface = 44;
constexpr uint32_t kNormalizerName = 1, kNormalizerCharsmap = 2, kNormalizerAddDummyPrefix = 3,
                   kNormalizerRemoveExtraWhitespaces = 4, kNormalizerEscapeWhitespaces = 5;
}  // namespace field

enum ModelType : uint64_t { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

// What the wire format says beyond libsentencepiece's API, with proto2's defaults for absent fields.
struct WireSettings {
  uint64_t model_type = kUnigram;
  bool treat_whitespace_as_suffix = false, byte_fallback = false;
  bool has_unk_surface = false;
  std::string unk_surface;
  std::string normalizer_name, charsmap;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
  std::string denormalizer_charsmap;
  std::vector<PieceType> piece_types;  // ModelProto.pieces[i].type, NORMAL when absent
  bool piece_refused = false;          // the read stopped at a piece Tern's limits refuse
};

Status expect(const ProtoField& f, WireType type, std::string_view what) {
  if (f.type == type) return Status::Ok();
  return InvalidArgument(std::string(what) + " (field " + std::to_string(f.number) + ") has the wrong wire type");
}

Status read_trainer_spec(std::string_view m, WireSettings* s) {
  return for_each_proto_field(m, "trainer_spec", [s](const ProtoField& f) -> Status {
    switch (f.number) {
      case field::kTrainerModelType:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "trainer_spec.model_type"));
        // A closed proto2 enum: a value it does not name is kept aside, leaving the field as it was.
        if (f.varint >= kUnigram && f.varint <= kChar) s->model_type = f.varint;
        break;
      case field::kTrainerTreatWhitespaceAsSuffix:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "trainer_spec.treat_whitespace_as_suffix"));
        s->treat_whitespace_as_suffix = f.varint != 0;
        break;
      case field::kTrainerByteFallback:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "trainer_spec.byte_fallback"));
        s->byte_fallback = f.varint != 0;
        break;
      case field::kTrainerUnkSurface:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "trainer_spec.unk_surface"));
        s->has_unk_surface = true;
        s->unk_surface = std::string(f.bytes);
        break;
      default:
        break;
    }
    return Status::Ok();
  });
}

Status read_normalizer_spec(std::string_view m, WireSettings* s) {
  return for_each_proto_field(m, "normalizer_spec", [s](const ProtoField& f) -> Status {
    switch (f.number) {
      case field::kNormalizerName:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "normalizer_spec.name"));
        s->normalizer_name = std::string(f.bytes);
        break;
      case field::kNormalizerCharsmap:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "normalizer_spec.precompiled_charsmap"));
        s->charsmap = std::string(f.bytes);
        break;
      case field::kNormalizerAddDummyPrefix:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "normalizer_spec.add_dummy_prefix"));
        s->add_dummy_prefix = f.varint != 0;
        break;
      case field::kNormalizerRemoveExtraWhitespaces:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "normalizer_spec.remove_extra_whitespaces"));
        s->remove_extra_whitespaces = f.varint != 0;
        break;
      case field::kNormalizerEscapeWhitespaces:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "normalizer_spec.escape_whitespaces"));
        s->escape_whitespaces = f.varint != 0;
        break;
      default:
        break;
    }
    return Status::Ok();
  });
}

// Only the charsmap matters: libsentencepiece applies a denormalizer to decoded text only when it has one.
Status read_denormalizer_spec(std::string_view m, WireSettings* s) {
  return for_each_proto_field(m, "denormalizer_spec", [s](const ProtoField& f) -> Status {
    if (f.number == field::kNormalizerCharsmap) {
      TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "denormalizer_spec.precompiled_charsmap"));
      s->denormalizer_charsmap = std::string(f.bytes);
    }
    return Status::Ok();
  });
}

// libsentencepiece's API tells unknown, control, unused and byte pieces apart but not user-defined ones. The
// piece's text is checked here, before libsentencepiece sees the model: its trie build recurses once per byte of a
// piece (one of ~120,000 bytes overflows the stack) and throws on an empty key, which a piece starting with a NUL
// is to it (it keeps pieces as C strings).
Status read_piece(std::string_view m, WireSettings* s) {
  PieceType type = PieceType::kNormal;
  std::string_view text;  // the last occurrence wins
  TERN_RETURN_IF_ERROR(for_each_proto_field(m, "pieces", [&](const ProtoField& f) -> Status {
    if (f.number == field::kPiecePiece) {
      TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "pieces.piece"));
      text = f.bytes;
    }
    if (f.number == field::kPieceType) {
      TERN_RETURN_IF_ERROR(expect(f, WireType::kVarint, "pieces.type"));
      // A closed proto2 enum: a value it does not name leaves the field as it was.
      if (f.varint >= uint64_t(PieceType::kNormal) && f.varint <= uint64_t(PieceType::kByte)) {
        type = PieceType(f.varint);
      }
    }
    return Status::Ok();
  }));
  const std::string what = "piece " + std::to_string(s->piece_types.size());
  s->piece_refused = true;
  if (text.empty()) return InvalidArgument(what + " is empty");
  if (text.size() > kMaxPieceBytes) return InvalidArgument(piece_too_long_message(what, text.size()));
  if (text.find('\0') != std::string_view::npos) return InvalidArgument(what + " holds a NUL byte");
  s->piece_refused = false;
  s->piece_types.push_back(type);
  return Status::Ok();
}

Status read_wire_settings(std::string_view bytes, WireSettings* s) {
  // An embedded message given more than once merges, field by field: reading each occurrence in turn does that.
  return for_each_proto_field(bytes, "ModelProto", [s](const ProtoField& f) -> Status {
    switch (f.number) {
      case field::kModelPieces:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "pieces"));
        return read_piece(f.bytes, s);
      case field::kModelTrainerSpec:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "trainer_spec"));
        return read_trainer_spec(f.bytes, s);
      case field::kModelNormalizerSpec:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "normalizer_spec"));
        return read_normalizer_spec(f.bytes, s);
      case field::kModelDenormalizerSpec:
        TERN_RETURN_IF_ERROR(expect(f, WireType::kLengthDelimited, "denormalizer_spec"));
        return read_denormalizer_spec(f.bytes, s);
      default:
        return Status::Ok();
    }
  });
}

// What the API says of a piece, where it says anything: it must agree with the wire format's type.
bool api_agrees(const sentencepiece::SentencePieceProcessor& sp, int id, PieceType type) {
  return sp.IsUnknown(id) == (type == PieceType::kUnknown) && sp.IsControl(id) == (type == PieceType::kControl) &&
         sp.IsUnused(id) == (type == PieceType::kUnused) && sp.IsByte(id) == (type == PieceType::kByte);
}

}  // namespace

SentencePieceSpec SentencePieceFile::spec() const {
  SentencePieceSpec s;
  s.bpe = bpe;
  s.pieces.assign(pieces.begin(), pieces.end());
  s.scores = scores;
  s.types = types;
  s.precompiled_charsmap = precompiled_charsmap;
  s.add_dummy_prefix = add_dummy_prefix;
  s.remove_extra_whitespaces = remove_extra_whitespaces;
  s.escape_whitespaces = escape_whitespaces;
  s.treat_whitespace_as_suffix = treat_whitespace_as_suffix;
  s.byte_fallback = byte_fallback;
  s.unk_id = unk_id;
  return s;
}

Result<SentencePieceFile> parse_sentencepiece_model(const std::string& bytes, const std::string& name,
                                                    int64_t vocab_size, const std::string& count_note) {
  const std::string quoted = "'" + name + "'";
  // The wire format first, in one linear pass: the pieces' count and lengths are checked before libsentencepiece
  // builds anything from them (millions of pieces for a small vocabulary cost it seconds and gigabytes).
  WireSettings wire;
  if (Status st = read_wire_settings(bytes, &wire); !st.ok()) {
    if (wire.piece_refused) return InvalidArgument(quoted + ": " + st.message());
    // Bytes that are not the message's wire format are no model libsentencepiece loads either.
    return InvalidArgument(quoted + " is not a SentencePiece model libsentencepiece loads: " + st.message());
  }
  if (vocab_size >= 0 && int64_t(wire.piece_types.size()) != vocab_size) {
    return InvalidArgument(quoted + " holds " + std::to_string(wire.piece_types.size()) +
                           " pieces; the model's vocabulary has " + std::to_string(vocab_size) +
                           " tokens (the width of its logits)" + count_note);
  }
  sentencepiece::SentencePieceProcessor sp;
  sentencepiece::util::Status loaded;
  try {  // its trie builder reports some bad keys by throwing
    loaded = sp.LoadFromSerializedProto(bytes);
  } catch (const std::exception& e) {
    return InvalidArgument(quoted + " is not a SentencePiece model libsentencepiece loads: " + e.what());
  }
  if (!loaded.ok()) {
    return InvalidArgument(quoted + " is not a SentencePiece model libsentencepiece loads: " + loaded.ToString());
  }

  auto refuse = [&](const std::string& setting) {
    return Unsupported(quoted + ": " + setting + " (Tern's tokenizer would not match libsentencepiece)");
  };
  if (wire.model_type == kWord || wire.model_type == kChar) {
    return refuse(std::string("model_type ") + (wire.model_type == kWord ? "WORD" : "CHAR") +
                  " is not supported, only UNIGRAM and BPE");
  }
  if (!wire.denormalizer_charsmap.empty()) return refuse("a denormalizer_spec with a precompiled_charsmap");
  if (wire.has_unk_surface && wire.unk_surface != kDefaultUnknownSurface) {
    return refuse("trainer_spec.unk_surface '" + wire.unk_surface + "' is not the default ' \xE2\x81\x87 '");
  }

  SentencePieceFile file;
  file.bpe = wire.model_type == kBpe;
  const int v = sp.GetPieceSize();
  if (wire.piece_types.size() != size_t(v)) {
    return InvalidArgument(quoted + ": " + std::to_string(wire.piece_types.size()) +
                           " pieces in the wire format but libsentencepiece has " + std::to_string(v));
  }
  file.pieces.reserve(size_t(v));
  file.scores.reserve(size_t(v));
  file.types.reserve(size_t(v));
  for (int id = 0; id < v; ++id) {
    file.pieces.push_back(sp.IdToPiece(id));
    file.scores.push_back(sp.GetScore(id));
    const PieceType type = wire.piece_types[size_t(id)];
    if (!api_agrees(sp, id, type)) {
      return InvalidArgument(quoted + ": piece " + std::to_string(id) + "'s type " + std::to_string(int(type)) +
                             " is not the one libsentencepiece reports");
    }
    file.types.push_back(type);
  }
  file.normalizer_name = std::move(wire.normalizer_name);
  file.precompiled_charsmap = std::move(wire.charsmap);
  file.add_dummy_prefix = wire.add_dummy_prefix;
  file.remove_extra_whitespaces = wire.remove_extra_whitespaces;
  file.escape_whitespaces = wire.escape_whitespaces;
  file.treat_whitespace_as_suffix = wire.treat_whitespace_as_suffix;
  file.byte_fallback = wire.byte_fallback;
  file.unk_id = sp.unk_id();
  file.bos_id = sp.bos_id();
  file.eos_id = sp.eos_id();
  file.pad_id = sp.pad_id();

  // The tokenizer's own checks (stricter than libsentencepiece's in places: no piece may repeat another at all).
  auto tokenizer = SentencePieceTokenizer::create(file.spec());
  if (!tokenizer.ok()) return Status(tokenizer.status().code(), quoted + ": " + tokenizer.status().message());
  return file;
}

Result<SentencePieceFile> read_sentencepiece_file(const std::string& path, int64_t vocab_size,
                                                  const std::string& count_note) {
  TERN_ASSIGN_OR_RETURN(InputFile in, InputFile::open(path));
  TERN_ASSIGN_OR_RETURN(std::string bytes, in.read_all(kMaxModelBytes, "a SentencePiece model"));
  return parse_sentencepiece_model(bytes, path, vocab_size, count_note);
}

}  // namespace tern::convert
