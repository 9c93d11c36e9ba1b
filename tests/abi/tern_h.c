/* SPDX-License-Identifier: MIT */
/* tern.h alone, as C99 (tests/CMakeLists.txt compiles it with -std=c99 -pedantic -Werror) and as C++11. */
#include "tern/tern.h"

int tern_abi_check_header(void);
int tern_abi_check_header(void) {
  tern_session_options options;
  tern_session_options_init(&options);
  return options.backend == TERN_BACKEND_CPU && TERN_VERSION_MAJOR >= 0 ? 0 : 1;
}
