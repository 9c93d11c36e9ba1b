// SPDX-License-Identifier: MIT
// Buffers a generated token streams whole on transparent huge pages: XNNPACK's packed weights, attention state and
// the arena are tens of MiB read from memory for every token, and on 4 KiB pages each 4 KiB of that costs a TLB miss
// and a restart of the hardware prefetcher. Linux backs a 2 MiB-aligned range with huge pages when the range is
// marked (madvise MADV_HUGEPAGE; the kernel's usual "madvise" mode gives them to marked ranges only). Elsewhere, or
// where the kernel declines, a buffer is an ordinary aligned allocation. Resident memory is what it was: these
// buffers are written whole when the session is created.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace tern::cpu {

constexpr size_t kHugePageBytes = size_t(2) << 20;

// `bytes` bytes aligned to `alignment` (a power of two); a buffer of at least kHugePageBytes starts on a huge page
// and its whole huge pages are marked for huge pages. Null when out of memory. Freed by free_large.
void* allocate_large(size_t alignment, size_t bytes);
void free_large(void* p);

// std::vector's allocator on allocate_large.
template <typename T>
struct LargeAllocator {
  using value_type = T;
  LargeAllocator() = default;
  template <typename U>
  LargeAllocator(const LargeAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    void* p = allocate_large(alignof(T) < 64 ? 64 : alignof(T), n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { free_large(p); }
  template <typename U>
  bool operator==(const LargeAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const LargeAllocator<U>&) const { return false; }
};

template <typename T>
using LargeVector = std::vector<T, LargeAllocator<T>>;

}  // namespace tern::cpu
