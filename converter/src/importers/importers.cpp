// SPDX-License-Identifier: MIT
#include "importers/importers.h"

#include "config.h"
#include "json_text.h"

namespace tern::convert {

const std::vector<Importer>& importers() {
  static const std::vector<Importer> list = {
      {"tern-reference", "Tern's reference decoder family (converter/reference-family.md)", import_reference},
      {"adaptive-span", "facebookresearch/adaptive-span models (converter/adaptive-span.md)", import_adaptive_span},
      {"reformer", "Hugging Face Reformer, ReformerModelWithLMHead (converter/reformer.md)", nullptr, import_reformer},
      {"transfo-xl", "Hugging Face Transformer-XL, TransfoXLLMHeadModel (converter/transfo-xl.md)", import_transfo_xl},
      {"llama", "Hugging Face Llama 1-3, LlamaForCausalLM (docs/models-llama.md)", import_llama},
      {"mistral", "Hugging Face Mistral, MistralForCausalLM (docs/models-llama.md)", import_mistral},
      {"qwen2", "Hugging Face Qwen2 / Qwen2.5, Qwen2ForCausalLM (docs/models-llama.md)", import_qwen2},
      {"qwen3", "Hugging Face Qwen3, Qwen3ForCausalLM (docs/models-llama.md)", import_qwen3},
      {"phi3", "Hugging Face Phi-3 / Phi-4-mini, Phi3ForCausalLM (docs/models-llama.md)", import_phi3},
      {"gemma2", "Hugging Face Gemma 2, Gemma2ForCausalLM (docs/models-gemma.md)", import_gemma2},
      {"gemma3_text", "Hugging Face Gemma 3 text, Gemma3ForCausalLM (docs/models-gemma.md)", import_gemma3_text},
      {"gpt2", "Hugging Face GPT-2, GPT2LMHeadModel (docs/models-gpt2.md)", import_gpt2},
  };
  return list;
}

Result<const Importer*> find_importer(const nlohmann::json& config) {
  TERN_ASSIGN_OR_RETURN(const std::string type, Config(config).string("model_type"));
  std::string known;
  for (const Importer& imp : importers()) {
    if (type == imp.model_type) return &imp;
    known += std::string(known.empty() ? "" : ", ") + imp.model_type;
  }
  return Unsupported("config.json: unknown model_type '" + clip(type) + "' (known: " + known + ")");
}

}  // namespace tern::convert
