// SPDX-License-Identifier: MIT
#include "core/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tern {
namespace {

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status field_error(const char* field, const std::string& rule, double got) {
  return InvalidArgument(std::string("tern_sampler_options.") + field + " must be " + rule + ", got " + number(got));
}

// Logit a before logit b: larger first, the lower id among equal ones.
struct ByLogit {
  const float* l;
  bool operator()(int32_t a, int32_t b) const { return l[a] > l[b] || (l[a] == l[b] && a < b); }
};
struct ByProbability {
  const double* p;
  bool operator()(int32_t a, int32_t b) const { return p[a] > p[b] || (p[a] == p[b] && a < b); }
};

}  // namespace

void Xoshiro256::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) s = splitmix64(&x);
}

uint64_t Xoshiro256::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

Status apply_repetition_penalty(float* logits, int64_t vocab, const int32_t* history, int64_t n_history, int64_t last_n,
                                float penalty, uint8_t* marks) {
  const int64_t first = last_n > 0 && last_n < n_history ? n_history - last_n : 0;
  for (int64_t i = first; i < n_history; ++i) {
    if (history[i] < 0 || int64_t(history[i]) >= vocab) {
      return InvalidArgument("tern_sampler_sample: history[" + std::to_string(i) + "] = " + std::to_string(history[i]) +
                             " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (penalty == 1.0f) return Status::Ok();
  for (int64_t i = first; i < n_history; ++i) {
    const size_t id = size_t(history[i]);
    if (marks[id]) continue;  // once per distinct id
    marks[id] = 1;
    const float penalized = logits[id] > 0.0f ? logits[id] / penalty : logits[id] * penalty;
    // A penalty far from 1 overflows a finite logit (1e30 / 1e-10); it saturates at the largest finite float
    // instead, so that every probability below stays a number. A masked logit (-inf) stays masked.
    logits[id] = std::isinf(penalized) && std::isfinite(logits[id])
                     ? std::copysign(std::numeric_limits<float>::max(), penalized)
                     : penalized;
  }
  for (int64_t i = first; i < n_history; ++i) marks[size_t(history[i])] = 0;
  return Status::Ok();
}

tern_sampler_options default_sampler_options() {
  tern_sampler_options o;
  o.struct_size = sizeof(tern_sampler_options);
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.repetition_penalty = 1.0f;
  o.repetition_last_n = 64;
  o.seed = 0;
  return o;
}

Result<LogitSampler> LogitSampler::create(const tern_sampler_options& o) {
  if (!std::isfinite(o.temperature) || o.temperature < 0.0f) {
    return field_error("temperature", "a finite number >= 0 (0: greedy)", o.temperature);
  }
  if (o.top_k < 0) return field_error("top_k", ">= 0 (0: off)", o.top_k);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return field_error("top_p", "in (0, 1] (1: off)", o.top_p);
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) return field_error("min_p", "in [0, 1] (0: off)", o.min_p);
  if (!std::isfinite(o.repetition_penalty) || !(o.repetition_penalty > 0.0f)) {
    return field_error("repetition_penalty", "a finite number > 0 (1: off)", o.repetition_penalty);
  }
  if (o.repetition_last_n < 0) {
    return field_error("repetition_last_n", ">= 0 (0: the whole history)", o.repetition_last_n);
  }
  return LogitSampler(o);
}

Result<int32_t> LogitSampler::sample(const float* logits, int64_t vocab, const int32_t* history, int64_t n_history) {
  if (logits == nullptr) return InvalidArgument("tern_sampler_sample: logits is NULL");
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument("tern_sampler_sample: vocab " + std::to_string(vocab) + " is outside [1, 2^31)");
  }
  if (n_history < 0 || (history == nullptr && n_history > 0)) {
    return InvalidArgument("tern_sampler_sample: history is null or n_history " + std::to_string(n_history) + " is negative");
  }
  const size_t V = size_t(vocab);
  if (logits_.size() != V) {  // scratch, once per vocab size
    logits_.assign(V, 0.0f);
    p_.assign(V, 0.0);
    order_.assign(V, 0);
    kept_.assign(V, 0);
  }
  bool any_finite = false;
  for (size_t i = 0; i < V; ++i) {
    const float l = logits[i];
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) {
      return InvalidArgument("tern_sampler_sample: logits[" + std::to_string(i) + "] is " + number(l));
    }
    any_finite = any_finite || l != -std::numeric_limits<float>::infinity();
    logits_[i] = l;
  }
  if (!any_finite) return InvalidArgument("tern_sampler_sample: every logit is -inf");

  // 1. Repetition penalty.
  TERN_RETURN_IF_ERROR(apply_repetition_penalty(logits_.data(), vocab, history, n_history, options_.repetition_last_n,
                                                options_.repetition_penalty, kept_.data()));

  // 2. Greedy: the largest logit, the lowest id among equals.
  if (options_.temperature == 0.0f) {
    int32_t best = 0;
    for (size_t i = 1; i < V; ++i) {
      if (logits_[i] > logits_[size_t(best)]) best = int32_t(i);
    }
    return best;
  }

  // 3. top-k: the k first in (logit descending, id ascending).
  for (size_t i = 0; i < V; ++i) order_[i] = int32_t(i);
  size_t k = V;
  if (options_.top_k > 0 && size_t(options_.top_k) < V) {
    k = size_t(options_.top_k);
    std::nth_element(order_.begin(), order_.begin() + (k - 1), order_.end(), ByLogit{logits_.data()});
  }
  // order_[0..k) are the candidates (in no particular order yet).

  // 4. Temperature over the candidates.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < k; ++i) max_logit = std::max(max_logit, logits_[size_t(order_[i])]);
  const double inv_t = 1.0 / double(options_.temperature);
  double mass = 0.0, p_max = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const size_t id = size_t(order_[i]);
    const double p = std::exp((double(logits_[id]) - double(max_logit)) * inv_t);
    p_[id] = p;
    mass += p;
    p_max = std::max(p_max, p);
  }

  // 5. top-p: the shortest prefix of (p descending, id ascending) that holds top_p of the mass.
  if (options_.top_p < 1.0f && k > 1) {
    std::sort(order_.begin(), order_.begin() + k, ByProbability{p_.data()});
    const double want = double(options_.top_p) * mass;
    double sum = 0.0;
    size_t keep = 0;
    while (keep < k) {
      sum += p_[size_t(order_[keep])];
      ++keep;
      if (sum >= want) break;
    }
    k = keep;
  }

  // 6. min-p, relative to the most likely token (always among the candidates: it is first in every order above).
  const double floor = double(options_.min_p) * p_max;
  for (size_t i = 0; i < k; ++i) {
    const size_t id = size_t(order_[i]);
    if (p_[id] >= floor) kept_[id] = 1;
  }

  // 7. Draw, walking the kept tokens in increasing id.
  double kept_mass = 0.0;
  for (size_t i = 0; i < k; ++i) {
    if (kept_[size_t(order_[i])]) kept_mass += p_[size_t(order_[i])];
  }
  const double target = rng_.uniform() * kept_mass;
  double sum = 0.0;
  int32_t chosen = -1, last_kept = -1;
  for (size_t id = 0; id < V; ++id) {
    if (!kept_[id]) continue;
    kept_[id] = 0;  // the scratch is clean for the next call
    if (p_[id] > 0.0) last_kept = int32_t(id);
    sum += p_[id];
    if (chosen < 0 && sum > target) chosen = int32_t(id);
  }
  if (chosen < 0) chosen = last_kept;  // rounding: u * mass within the last ulp of the sum
  // The most likely candidate has p = 1 and is always kept, so a token is chosen; this guards the contract that
  // no id outside the vocabulary ever comes back with TERN_OK.
  if (chosen < 0) return InternalError("tern_sampler_sample: no token could be drawn (probabilities " + number(p_max) + ")");
  return chosen;
}

}  // namespace tern
