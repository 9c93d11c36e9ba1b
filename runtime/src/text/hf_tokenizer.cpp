// SPDX-License-Identifier: MIT
#include "text/hf_tokenizer.h"

namespace tern {
namespace {

// The post-processor's ids around the text; at most this many each.
constexpr size_t kMaxTemplateIds = 64;

Status template_ids(const char* field, const flatbuffers::Vector<int32_t>* in, int64_t vocab_size,
                    std::vector<int32_t>* out) {
  if (in == nullptr) return Status::Ok();
  if (in->size() > kMaxTemplateIds) {
    return InvalidModel(std::string("vocabulary: hf_tokenizer.") + field + " has more than " +
                        std::to_string(kMaxTemplateIds) + " ids");
  }
  for (int32_t id : *in) {
    if (id < 0 || id >= vocab_size) {
      return InvalidModel(std::string("vocabulary: hf_tokenizer.") + field + " id " + std::to_string(id) +
                          " is outside [0, " + std::to_string(vocab_size) + ")");
    }
    out->push_back(id);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<HfTokenizer>> HfTokenizer::from_table(const fb::HfTokenizer& table, int64_t vocab_size) {
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  TERN_ASSIGN_OR_RETURN(t->vocab_, HfVocab::from_table(table, vocab_size));
  switch (table.model()) {
    case fb::HfModelKind::BPE: {
      TERN_ASSIGN_OR_RETURN(HfBpe bpe, HfBpe::create(table, &t->vocab_));
      t->bpe_ = std::make_unique<HfBpe>(std::move(bpe));
      break;
    }
    case fb::HfModelKind::UNIGRAM: {
      TERN_ASSIGN_OR_RETURN(HfUnigram unigram, HfUnigram::create(table, &t->vocab_));
      t->unigram_ = std::make_unique<HfUnigram>(std::move(unigram));
      break;
    }
    default:
      return InvalidModel("vocabulary: hf_tokenizer.model " + std::to_string(int(table.model())) +
                          " is not BPE or UNIGRAM");
  }
  TERN_ASSIGN_OR_RETURN(HfDecoders decoders, HfDecoders::create(table, &t->vocab_));
  t->decoders_ = std::make_unique<HfDecoders>(std::move(decoders));
  TERN_ASSIGN_OR_RETURN(t->pipeline_, HfTextPipeline::from_table(table, vocab_size));
  TERN_RETURN_IF_ERROR(template_ids("prefix_ids", table.prefix_ids(), vocab_size, &t->prefix_ids_));
  TERN_RETURN_IF_ERROR(template_ids("suffix_ids", table.suffix_ids(), vocab_size, &t->suffix_ids_));
  return t;
}

Status HfTokenizer::encode(std::string_view text, bool add_special_tokens, bool split_specials,
                           std::vector<int32_t>* ids) const {
  if (text.size() > UINT32_MAX) {
    return InvalidArgument("the text holds " + std::to_string(text.size()) +
                           " bytes; a tokenizer.json tokenizer takes less than 4 GiB at once");
  }
  std::vector<HfSegment> segments;
  TERN_RETURN_IF_ERROR(pipeline_->split(text, split_specials, &segments));
  if (add_special_tokens) ids->insert(ids->end(), prefix_ids_.begin(), prefix_ids_.end());
  HfBpe::Scratch bpe_scratch;
  HfUnigram::Scratch unigram_scratch;
  for (const HfSegment& segment : segments) {
    if (segment.added_id >= 0) {
      ids->push_back(segment.added_id);
    } else if (bpe_) {
      bpe_->encode_word(segment.word, &bpe_scratch, ids);
    } else {
      TERN_RETURN_IF_ERROR(unigram_->encode_word(segment.word, &unigram_scratch, ids));
    }
  }
  if (add_special_tokens) ids->insert(ids->end(), suffix_ids_.begin(), suffix_ids_.end());
  return Status::Ok();
}

}  // namespace tern
