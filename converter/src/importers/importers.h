// SPDX-License-Identifier: MIT
// Importers turn one architecture's checkpoint into a Tern graph. The converter picks one by config.json's
// "model_type"; adding an architecture whose ops exist means one importers/<arch>.cpp built from the decoder pieces
// (decoder_builder.h) and one row in importers.cpp: docs/adding-an-architecture.md lists every file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

// Options some importers read (ConvertOptions' importer part).
struct ImportOptions {
  std::optional<uint64_t> hash_seed = std::nullopt;  // Reformer: seed of LSH rotations the checkpoint lacks
};

struct Importer {
  const char* model_type;  // config.json "model_type"
  const char* summary;     // one line for --help
  // Validates the config and every tensor it needs, then adds values, tensors, ops and metadata to `graph`.
  Status (*import)(const Checkpoint& checkpoint, GraphBuilder& graph);
  // When set, called instead of `import`, with the options.
  Status (*import_with_options)(const Checkpoint& checkpoint, const ImportOptions& options, GraphBuilder& graph) = nullptr;
};

const std::vector<Importer>& importers();

// The importer for config.json's model_type, or an error listing the known types.
Result<const Importer*> find_importer(const nlohmann::json& config);

// One per architecture, defined in importers/<arch>.cpp.
Status import_reference(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_adaptive_span(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_reformer(const Checkpoint& checkpoint, const ImportOptions& options, GraphBuilder& graph);
Status import_transfo_xl(const Checkpoint& checkpoint, GraphBuilder& graph);
// Hugging Face decoders (importers/llama_family.cpp, gemma.cpp, gpt2.cpp).
Status import_llama(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_mistral(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_qwen2(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_qwen3(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_phi3(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_gemma2(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_gemma3_text(const Checkpoint& checkpoint, GraphBuilder& graph);
Status import_gpt2(const Checkpoint& checkpoint, GraphBuilder& graph);

}  // namespace tern::convert
