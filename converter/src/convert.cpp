// SPDX-License-Identifier: MIT
#include "convert.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <exception>
#include <new>

#include "checkpoint.h"
#include "graph_builder.h"
#include "hf_tokenizer_json.h"
#include "importers/importers.h"
#include "format/input_file.h"
#include "json_text.h"
#include "format/temp_file.h"
#include "sentencepiece_file.h"
#include "symbols_file.h"
#include "writer.h"

namespace tern::convert {
namespace {

// The output must not be one of the inputs (the same file by device and inode, whatever the path says).
Status check_output_not_input(const std::string& out_path, const Checkpoint& checkpoint) {
  struct stat st {};
  if (::stat(out_path.c_str(), &st) != 0) return Status::Ok();
  for (const InputId& in : checkpoint.inputs())
    if (in.device == st.st_dev && in.inode == st.st_ino)
      return InvalidArgument("'" + out_path + "' is the checkpoint's own '" + in.path +
                             "'; refusing to overwrite an input");
  return Status::Ok();
}

Status check_output_not_tokenizer(const std::string& out_path, const std::string& tokenizer_path) {
  struct stat out {}, in {};
  if (tokenizer_path.empty() || ::stat(out_path.c_str(), &out) != 0 || ::stat(tokenizer_path.c_str(), &in) != 0)
    return Status::Ok();
  if (out.st_dev == in.st_dev && out.st_ino == in.st_ino)
    return InvalidArgument("'" + out_path + "' is the tokenizer file '" + tokenizer_path + "'; refusing to overwrite an input");
  return Status::Ok();
}

std::string describe_tokenizer(const ModelMetadata& m) {
  switch (m.vocab_kind) {
    case fb::VocabKind::BYTES: return "bytes";
    case fb::VocabKind::SHIFTED_BYTES: return "bytes + " + std::to_string(m.byte_offset);
    case fb::VocabKind::SENTENCEPIECE:
      return std::string("sentencepiece ") + (m.sentencepiece->bpe ? "bpe" : "unigram") + ", " +
             std::to_string(m.sentencepiece->pieces.size()) + " pieces";
    case fb::VocabKind::SYMBOLS:
      return std::string(m.symbols->unit == fb::SymbolUnit::WORDS        ? "words"
                         : m.symbols->unit == fb::SymbolUnit::CHARACTERS ? "characters"
                                                                         : "bytes-decimal") +
             ", " + std::to_string(m.symbols->symbols.size()) + " symbols";
    case fb::VocabKind::HF_TOKENIZER:
      return std::string("tokenizer.json ") + (m.hf_tokenizer->model == fb::HfModelKind::BPE ? "bpe" : "unigram") +
             ", " + std::to_string(m.hf_tokenizer->model_vocab_entries) + " tokens + " +
             std::to_string(m.hf_tokenizer->added_tokens.size()) + " added";
    default: return "none (ids only)";
  }
}

Status convert_unguarded(const std::string& checkpoint_dir, const std::string& out_path,
                         const ConvertOptions& options, ConvertReport* report) {
  const auto start = std::chrono::steady_clock::now();
  TERN_RETURN_IF_ERROR(check_replaceable(out_path));
  TERN_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(checkpoint_dir, options.allow_non_finite));
  TERN_RETURN_IF_ERROR(check_output_not_input(out_path, *checkpoint));
  TERN_ASSIGN_OR_RETURN(const Importer* importer, find_importer(checkpoint->config()));

  GraphBuilder graph;
  ImportOptions import_options;
  import_options.hash_seed = options.hash_seed;
  TERN_RETURN_IF_ERROR(importer->import_with_options ? importer->import_with_options(*checkpoint, import_options, graph)
                                                     : importer->import(*checkpoint, graph));
  std::string tokenizer_path;
  TERN_RETURN_IF_ERROR(attach_tokenizer(checkpoint_dir, options.tokenizer, &graph.metadata(), &tokenizer_path));
  TERN_RETURN_IF_ERROR(check_output_not_tokenizer(out_path, tokenizer_path));
  const std::vector<std::string> unused = checkpoint->unused();
  if (!options.quiet && !unused.empty()) std::fprintf(stderr, "tern-convert: warning: %s\n", describe_unused(unused).c_str());

  CompressReport compressed;
  TERN_RETURN_IF_ERROR(compress_weights(graph, options.weights, &compressed));

  WriteStats stats;
  TERN_RETURN_IF_ERROR(write_model(graph, out_path, WriteOptions{options.quiet, /*verify=*/true}, &stats));

  if (report) {
    report->architecture = graph.metadata().architecture;
    report->description = graph.metadata().description;
    report->tensors = graph.tensors().size();
    report->values = graph.values().size();
    report->ops = graph.ops().size();
    report->file_size = stats.file_size;
    report->data_size = stats.data_size;
    report->unused_tensors = unused;
    report->weights = compressed;
    report->tokenizer = describe_tokenizer(graph.metadata());
    report->tokenizer_path = tokenizer_path;
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return Status::Ok();
}

}  // namespace

Status convert_checkpoint(const std::string& checkpoint_dir, const std::string& out_path,
                          const ConvertOptions& options, ConvertReport* report) {
  // Nothing below should throw; this keeps a stray library exception from crossing the API regardless.
  try {
    return convert_unguarded(checkpoint_dir, out_path, options, report);
  } catch (const std::bad_alloc&) {
    return OutOfMemory("out of memory while converting " + checkpoint_dir);
  } catch (const std::exception& e) {
    return InvalidModel(checkpoint_dir + ": " + clip(e.what(), 200));
  }
}

}  // namespace tern::convert
