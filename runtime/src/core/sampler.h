// SPDX-License-Identifier: MIT
// Token sampling from a row of logits (tern_sampler_*): repetition penalty, top-k, temperature, top-p, min-p, then
// one draw from the library's own PRNG, so that a seed gives the same tokens on every platform and compiler.
//
// The steps, in this order (docs/generation.md, "The sampler's steps"):
//   1. repetition penalty: each distinct id among the last repetition_last_n history tokens (0: all of them) has its
//      logit divided by the penalty when positive and multiplied by it otherwise (CTRL, Keskar et al. 2019; HF's
//      RepetitionPenaltyLogitsProcessor). Every other logit is unchanged.
//   2. temperature 0: greedy, the largest penalised logit (the lowest id among equals); steps 3-6 do not run and the
//      PRNG does not advance.
//   3. top-k: the k largest logits, ties to the lower id (0: every token).
//   4. temperature: p_i = exp((l_i - l_max) / T) over the tokens kept, in double precision.
//   5. top-p: in order of p descending (ties to the lower id), the shortest prefix whose mass reaches top_p of the
//      kept mass; at least one token.
//   6. min-p: tokens with p_i >= min_p * p_max stay (the most likely one always does).
//   7. draw: u in [0, 1) from 53 bits of xoshiro256** (seeded through splitmix64), and the first kept token, in
//      increasing id, whose cumulative p exceeds u times the kept mass.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format/status.h"
#include "tern/tern.h"

namespace tern {

// xoshiro256** (Blackman and Vigna 2018), its state filled from the seed by splitmix64: the same sequence on every
// platform, which std::uniform_real_distribution does not promise.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();
  // The four state words, for a saved generator (core/generator_state.cpp). All zero is no state of the generator
  // (it would stay zero): set_state refuses it.
  void state(uint64_t out[4]) const { std::memcpy(out, s_, sizeof s_); }
  bool set_state(const uint64_t in[4]) {
    if ((in[0] | in[1] | in[2] | in[3]) == 0) return false;
    std::memcpy(s_, in, sizeof s_);
    return true;
  }
  // [0, 1) from the top 53 bits: k * 2^-53 for k in [0, 2^53).
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t s_[4];
};

class LogitSampler {
 public:
  // Checks the options (struct_size, every field's range; messages name the field).
  static Result<LogitSampler> create(const tern_sampler_options& options);

  // One token from logits [vocab]. history [n_history] (ids in [0, vocab)) feeds the repetition penalty; it may be
  // null when n_history is 0. No allocation after the first call for a vocab size.
  Result<int32_t> sample(const float* logits, int64_t vocab, const int32_t* history, int64_t n_history);
  void reseed(uint64_t seed) { rng_.reseed(seed); }
  Xoshiro256& rng() { return rng_; }
  const Xoshiro256& rng() const { return rng_; }
  const tern_sampler_options& options() const { return options_; }

 private:
  explicit LogitSampler(const tern_sampler_options& options) : options_(options), rng_(options.seed) {}

  tern_sampler_options options_;
  Xoshiro256 rng_;
  // Scratch, sized once per vocab.
  std::vector<float> logits_;   // [vocab] penalised logits
  std::vector<double> p_;       // [vocab] unnormalised probabilities of the kept tokens
  std::vector<int32_t> order_;  // [vocab] candidate ids
  std::vector<uint8_t> kept_;   // [vocab] 1: kept; also marks the penalised ids
};

// Step 1 on logits [vocab] in place: each distinct id among the last last_n (0: all) of history [n_history] has its
// logit divided by penalty when positive and multiplied by it otherwise. marks [vocab], all 0, is scratch and is all
// 0 again on return. A history id outside [0, vocab) is TERN_INVALID_ARGUMENT, before anything changes.
Status apply_repetition_penalty(float* logits, int64_t vocab, const int32_t* history, int64_t n_history, int64_t last_n,
                                float penalty, uint8_t* marks);

// The defaults of tern_sampler_options_init.
tern_sampler_options default_sampler_options();

}  // namespace tern
