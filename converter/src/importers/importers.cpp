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
