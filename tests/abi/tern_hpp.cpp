// SPDX-License-Identifier: MIT
// tern.hpp alone, at its minimum standard (tests/CMakeLists.txt: -std=c++11 -pedantic -Wall -Wextra -Werror).
#include "tern/tern.hpp"

int tern_abi_check_wrapper(const char* path);
int tern_abi_check_wrapper(const char* path) {
  tern::Error error;
  tern::ModelHandle model = tern::ModelHandle::load(path, &error);
  if (error) return 1;
  tern_session_options options;
  tern_session_options_init(&options);
  tern::SessionHandle session = tern::SessionHandle::create(model, options, &error);
  if (error) return 1;
  std::vector<float> logits;
  std::vector<int32_t> ids(1, 65);
  if (tern::Error e = session.forward(ids, &logits)) return 1;
  return session.position() == 1 ? 0 : 1;
}
