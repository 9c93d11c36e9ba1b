// SPDX-License-Identifier: MIT
#include "cpu/huge_pages.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tern::cpu {

void* allocate_large(size_t alignment, size_t bytes) {
  const bool huge = bytes >= kHugePageBytes;
  if (huge && alignment < kHugePageBytes) alignment = kHugePageBytes;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  void* p = nullptr;
  if (posix_memalign(&p, alignment, bytes == 0 ? 1 : bytes) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Only the whole huge pages: the tail stays on small pages, so no byte past the buffer is ever made resident.
  // Failure (a kernel without transparent huge pages) leaves ordinary pages, which work the same.
  if (huge) madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return p;
}

void free_large(void* p) { free(p); }

}  // namespace tern::cpu
