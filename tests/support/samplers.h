// SPDX-License-Identifier: MIT
// Samplers the generation tests share (header only: tests/test_generation*.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>

#include "tern/tern.h"

namespace tern::test {

// A sampler at `temperature` among the 40 most likely tokens, drawing from `seed`; freed by the caller.
inline tern_sampler* top_k_sampler(float temperature, uint64_t seed) {
  tern_sampler_options o;
  tern_sampler_options_init(&o);
  o.temperature = temperature;
  o.top_k = 40;
  o.seed = seed;
  tern_sampler* s = nullptr;
  REQUIRE(tern_sampler_create(&o, &s) == TERN_OK);
  return s;
}

}  // namespace tern::test
