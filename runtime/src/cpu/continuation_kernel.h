// SPDX-License-Identifier: MIT
// A CPU kernel whose streaming state is a cache that only a later call reads (LSH and routing attention: their first
// call runs whole, later positions step against the cache; ops/attention_kinds.h, state_serves_later_calls_only). The
// cache holds max_tokens positions, or none in a forward_only session; CpuKernel's state methods forward to it.
// Cache has: capacity(), bytes(), reset(), saved_bytes(p), saved_count_bytes(p), check(p, in, label), save(p, out)
// and load(p, in).
#pragma once

#include <string>

#include "cpu/kernel.h"

namespace tern::cpu {

template <typename Cache>
class ContinuationKernel : public CpuKernel {
 public:
  // `what` names the cache in messages ("LSH", "routing").
  template <typename Spec>
  ContinuationKernel(const Node& node, const Spec& spec, const KernelConfig& cfg, const char* what)
      : node_(node), cache_(spec, cfg.forward_only ? 0 : cfg.max_tokens, cfg.buffers), what_(what) {}

  void reset() override { cache_.reset(); }
  bool has_state() const override { return caching(); }
  uint64_t state_bytes() const override { return cache_.bytes(); }
  uint64_t saved_state_bytes(int64_t position) const override { return cache_.saved_bytes(position); }
  uint64_t saved_count_bytes(int64_t position) const override { return cache_.saved_count_bytes(position); }
  Status check_saved_counts(int64_t position, const uint8_t* in) const override {
    return cache_.check(position, in, node_.label());
  }
  void save_state(int64_t position, uint8_t* out) const override { cache_.save(position, out); }
  void load_state(int64_t position, const uint8_t* in) override { cache_.load(position, in); }

 protected:
  // None in a forward_only session, which never continues a sequence.
  bool caching() const { return cache_.capacity() > 0; }
  // A call of n positions from pos0 must end within the cache (when there is one).
  Status check_fits(int64_t pos0, int64_t n) const {
    if (caching() && pos0 + n > cache_.capacity()) {
      return InvalidArgument(node_.label() + ": the " + what_ + " cache holds " + std::to_string(cache_.capacity()) +
                             " positions (max_tokens); this call would end at " + std::to_string(pos0 + n));
    }
    return Status::Ok();
  }

  const Node& node_;
  Cache cache_;  // what a later call continues from

 private:
  const char* what_;
};

}  // namespace tern::cpu
