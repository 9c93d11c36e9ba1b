// SPDX-License-Identifier: MIT
// Serialises a GraphBuilder into a .tern file (layout: schema/tern.fbs header comment):
//   [u32 LE size S][FlatBuffer, S bytes, identifier "TERN"][zero pad to data_alignment][data segment]
// The file appears atomically: it is written to a temporary next to the destination (temp_file.h), fsynced and
// renamed, so a failed conversion never leaves a partial file and never clobbers an existing one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/status.h"
#include "graph_builder.h"

namespace tern::convert {

constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kDataAlignment = 64;
constexpr const char* kProducer = "tern-convert 0.1.0";

struct WriteOptions {
  bool quiet = false;   // no progress lines on stderr
  // Run the loader's checks (tern::Model::load_buffer) on the written bytes before the rename; a failure removes the
  // temporary and names the loader's message. convert_checkpoint() always does; tests that write invalid graphs
  // on purpose do not.
  bool verify = false;
};

struct WriteStats {
  uint64_t file_size = 0;
  uint64_t flatbuffer_size = 0;  // including the 4-byte size prefix
  uint64_t data_size = 0;
};

// Offsets (relative to the data segment) of each tensor, each a multiple of `alignment`; `data_size`
// receives the end of the last tensor.
std::vector<uint64_t> layout_tensors(const std::vector<TensorSpec>& tensors, uint64_t alignment,
                                     uint64_t* data_size);

Status write_model(const GraphBuilder& graph, const std::string& out_path, const WriteOptions& options,
                   WriteStats* stats = nullptr);

}  // namespace tern::convert
