// SPDX-License-Identifier: MIT
#include "tokenizer_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <memory>

#include "hf_tokenizer_json.h"
#include "sentencepiece_file.h"
#include "symbols_file.h"

namespace tern::convert {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// The tokenizer file next to config.json, or "" when there is none. tokenizer.json comes before tokenizer.model:
// it is what `tokenizers` (and transformers' fast tokenizers) load.
std::string find_beside(const std::string& dir) {
  for (const char* name : {"tern_vocab.json", "tokenizer.json", "spiece.model", "tokenizer.model"}) {
    const std::string path = dir + "/" + name;
    if (exists(path)) return path;
  }
  return "";
}

// The directory `path` is in ("." for a bare name).
std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// A tokenizer.json: its ids all below the width of the logits. Ids the importer read from the checkpoint's config
// win; the others come from tokenizer_config.json (or special_tokens_map.json) beside the file.
Status attach_hf_tokenizer(const std::string& path, ModelMetadata* metadata) {
  TERN_ASSIGN_OR_RETURN(HfTokenizerJson file, read_hf_tokenizer_json(path, metadata->vocab_size));
  int32_t bos = -1, eos = -1;
  TERN_RETURN_IF_ERROR(hf_tokenizer_special_ids(directory_of(path), file, &bos, &eos));
  metadata->vocab_kind = fb::VocabKind::HF_TOKENIZER;
  metadata->vocab_note.clear();
  metadata->byte_offset = 0;
  if (metadata->bos_id < 0) metadata->bos_id = bos;
  if (metadata->eos_id < 0) metadata->eos_id = eos;
  metadata->unk_id = file.unk_id;
  // The tokenizer starts a text with bos exactly when its post-processor puts bos first.
  metadata->add_bos = metadata->bos_id >= 0 && std::find(file.prefix_ids.begin(), file.prefix_ids.end(),
                                                         metadata->bos_id) != file.prefix_ids.end();
  metadata->sentencepiece.reset();
  metadata->symbols.reset();
  metadata->hf_tokenizer = std::make_shared<const HfTokenizerJson>(std::move(file));
  return Status::Ok();
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
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0 && is_hf_tokenizer_json(path)) {
    TERN_RETURN_IF_ERROR(attach_hf_tokenizer(path, metadata));
    *used = path;
    return Status::Ok();
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
    metadata->hf_tokenizer.reset();
    metadata->symbols = std::make_shared<const SymbolsFile>(std::move(file));
    *used = path;
    return Status::Ok();
  }
  // The count is compared with the vocabulary before the model is built (read_sentencepiece_file).
  TERN_ASSIGN_OR_RETURN(SentencePieceFile file,
                        read_sentencepiece_file(path, metadata->vocab_size,
                                                choice.path.empty() ? "; --tokenizer none converts without it" : ""));
  metadata->vocab_kind = fb::VocabKind::SENTENCEPIECE;
  metadata->vocab_note.clear();
  metadata->byte_offset = 0;
  // Ids the importer read from the checkpoint's config (what its generation uses) win over the piece model's.
  if (metadata->bos_id < 0) metadata->bos_id = file.bos_id;
  if (metadata->eos_id < 0) metadata->eos_id = file.eos_id;
  metadata->unk_id = file.unk_id;
  metadata->pad_id = file.pad_id;
  metadata->symbols.reset();
  metadata->hf_tokenizer.reset();
  metadata->sentencepiece = std::make_shared<const SentencePieceFile>(std::move(file));
  *used = path;
  return Status::Ok();
}

}  // namespace tern::convert
