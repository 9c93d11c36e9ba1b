// SPDX-License-Identifier: MIT
// The pipeline parts of a tokenizer.json (hf_tokenizer_json.h): normalizer, pre_tokenizer, decoder and
// post_processor, each read as tokenizers 0.23's serde format reads it, Sequences flattened into the list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.h"
#include "format/status.h"
#include "hf_tokenizer_json.h"

namespace tern::convert {

// `value` is the tokenizer.json's member (null: none). `file` is the quoted path messages begin with.
Status read_hf_normalizer(const nlohmann::json& value, const std::string& file, std::vector<HfStepSpec>* out);
Status read_hf_pre_tokenizer(const nlohmann::json& value, const std::string& file, std::vector<HfStepSpec>* out);
Status read_hf_decoder(const nlohmann::json& value, const std::string& file, std::vector<HfStepSpec>* out);

// The ids the post-processor puts before and after a single text with add_special_tokens (TemplateProcessing's
// `single` template through its special_tokens, RobertaProcessing's and BertProcessing's cls and sep; ByteLevel adds
// none). A Sequence of processors nests: each later one wraps what the earlier ones made.
Status read_hf_post_processor(const nlohmann::json& value, const std::string& file, std::vector<int32_t>* prefix,
                              std::vector<int32_t>* suffix);

// Standard base64 with padding, as the base64 crate's STANDARD engine decodes it (no whitespace, canonical last
// symbol); false on anything else.
bool decode_base64(const std::string& text, std::string* out);

}  // namespace tern::convert
