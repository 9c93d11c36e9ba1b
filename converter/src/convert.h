// SPDX-License-Identifier: MIT
// Library entry point of tern-convert: checkpoint directory -> .tern file. Used by the CLI and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compress.h"
#include "tokenizer_file.h"
#include "format/status.h"

namespace tern::convert {

struct ConvertOptions {
  bool quiet = false;  // no progress or warnings on stderr
  // Reformer: seed of the LSH rotations drawn for a checkpoint that has none (converter/reformer.md); unset: the
  // config's hash_seed, else 0.
  std::optional<uint64_t> hash_seed = std::nullopt;
  // Convert weights that hold NaN or infinity; by default the first one is an error naming the tensor and index.
  bool allow_non_finite = false;
  // How weights are stored (--weights, --group-size, --weight-type); float32 by default.
  CompressOptions weights = {};
  // The tokenizer file (--tokenizer): by default spiece.model or tokenizer.model beside config.json.
  TokenizerChoice tokenizer = {};
};

// What a successful conversion produced.
struct ConvertReport {
  std::string architecture;
  std::string description;
  size_t tensors = 0;
  size_t values = 0;
  size_t ops = 0;
  uint64_t file_size = 0;
  uint64_t data_size = 0;
  std::vector<std::string> unused_tensors;  // checkpoint tensors the importer did not read, sorted
  CompressReport weights = {};                  // what --weights changed
  std::string tokenizer;                        // what text becomes ids with ("sentencepiece unigram, 320 pieces")
  std::string tokenizer_path;                   // the tokenizer file read, "" for none
  double seconds = 0;
};

// Reads `checkpoint_dir` (config.json + *.safetensors), picks the importer for its model_type and writes
// `out_path` atomically, after the runtime's loader has accepted the written bytes. On failure nothing is left at
// `out_path` that was not there before, and no temporary. An `out_path` that exists and is not a regular file
// (a directory, a device, a FIFO), or that is one of the checkpoint's own files, is refused before anything is read.
// Signals are the caller's: tern-convert calls remove_temporaries_on_signals() (temp_file.h).
Status convert_checkpoint(const std::string& checkpoint_dir, const std::string& out_path,
                          const ConvertOptions& options, ConvertReport* report = nullptr);

}  // namespace tern::convert
