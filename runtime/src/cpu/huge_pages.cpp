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

void* BufferSource::allocate(size_t bytes, size_t alignment) {
  void* p = app_ ? allocator_.allocate(allocator_.user_data, bytes, alignment) : allocate_large(alignment, bytes);
  if (!p) {
    refused_bytes_ = bytes;
    refused_alignment_ = alignment;
  }
  return p;
}

void BufferSource::release(void* p, size_t bytes) const {
  if (app_) {
    allocator_.release(allocator_.user_data, p, bytes);
  } else {
    free_large(p);
  }
}

std::string BufferSource::refusal() const {
  if (refused_bytes_ == 0) return "";
  return std::string(app_ ? "the app's allocator (tern_session_options.allocator)" : "the system allocator") +
         " returned NULL for " + std::to_string(refused_bytes_) + " bytes (alignment " +
         std::to_string(refused_alignment_) + ")";
}

}  // namespace tern::cpu
