// SPDX-License-Identifier: MIT
// The Vocabulary table a .tern file carries (schema/tern.fbs): the kind, the special ids and the tokenizer's own
// table (SentencePiece, symbols or HfTokenizer) of a model's metadata. write_model puts it in every file; the
// tokenizer fuzz target builds a runtime tokenizer from it without writing a model.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include "graph_builder.h"
#include "tern_generated.h"

namespace tern::convert {

flatbuffers::Offset<fb::Vocabulary> build_vocabulary(flatbuffers::FlatBufferBuilder& fbb,
                                                     const ModelMetadata& metadata);

}  // namespace tern::convert
