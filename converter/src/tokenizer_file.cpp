#include "tokenizer_file.h"

#include <sys/stat.h>

#include <memory>

#include "sentencepiece_file.h"
#include "symbols_file.h"

namespace tern::convert {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// The tokenizer file next to config.json, or "" when there is none.
std::string find_beside(const std::string& dir) {
  for (const char* name : {"tern_vocab.json", "spiece.model", "tokenizer.model"}) {
    const std::string path = dir + "/" + name;
    if (exists(path)) return path;
  }
  return "";
}

}  // namespace

Status attach_tokenizer(const std::string& checkpoint_dir, const TokenizerChoice& choice, ModelMetadata* metadata,
                        std::string* used) {
  used->clear();
  if (choice.none) return Status::Ok();
  const bool byte_level =
      metadata->vocab_kind == fb::VocabKind::BYTES || metadata->vocab_kind == fb::VocabKind::SHIFTED_BYTES;
  std::string path = choice.path;
  if (path.empty()) {
    if (byte_level) return Status::Ok();
    path = find_beside(checkpoint_dir);
    if (path.empty()) return Status::Ok();
  }
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    TERN_ASSIGN_OR_RETURN(SymbolsFile file, read_symbols_file(path));
    if (int64_t(file.symbols.size()) != metadata->vocab_size) {
      return InvalidArgument("'" + path + "' holds " + std::to_string(file.symbols.size()) +
                             " symbols; the model's vocabulary has " + std::to_string(metadata->vocab_size) +
                             " tokens (the width of its logits)");
    }
    metadata->vocab_kind = fb::VocabKind::SYMBOLS;
    metadata->vocab_note.clear();
    metadata->byte_offset = 0;
    metadata->bos_id = -1;
    metadata->eos_id = file.eos_id;
    metadata->unk_id = file.unk_id;
    metadata->pad_id = -1;
    metadata->sentencepiece.reset();
    metadata->symbols = std::make_shared<const SymbolsFile>(std::move(file));
    *used = path;
    return Status::Ok();
  }
  TERN_ASSIGN_OR_RETURN(SentencePieceFile file, read_sentencepiece_file(path));
  if (int64_t(file.pieces.size()) != metadata->vocab_size) {
    return InvalidArgument("'" + path + "' holds " + std::to_string(file.pieces.size()) +
                           " pieces; the model's vocabulary has " + std::to_string(metadata->vocab_size) +
                           " tokens (the width of its logits)" +
                           (choice.path.empty() ? "; --tokenizer none converts without it" : ""));
  }
  metadata->vocab_kind = fb::VocabKind::SENTENCEPIECE;
  metadata->vocab_note.clear();
  metadata->byte_offset = 0;
  // Ids the importer read from the checkpoint's config (what its generation uses) win over the piece model's.
  if (metadata->bos_id < 0) metadata->bos_id = file.bos_id;
  if (metadata->eos_id < 0) metadata->eos_id = file.eos_id;
  metadata->unk_id = file.unk_id;
  metadata->pad_id = file.pad_id;
  metadata->symbols.reset();
  metadata->sentencepiece = std::make_shared<const SentencePieceFile>(std::move(file));
  *used = path;
  return Status::Ok();
}

}  // namespace tern::convert
