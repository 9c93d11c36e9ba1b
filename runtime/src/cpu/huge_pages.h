// SPDX-License-Identifier: MIT
// Buffers a generated token streams whole on transparent huge pages: the packed weights, attention state and
// the arena are tens of MiB read from memory for every token, and on 4 KiB pages each 4 KiB of that costs a TLB miss
// and a restart of the hardware prefetcher. Linux backs a 2 MiB-aligned range with huge pages when the range is
// marked (madvise MADV_HUGEPAGE; the kernel's usual "madvise" mode gives them to marked ranges only). Elsewhere, or
// where the kernel declines, a buffer is an ordinary aligned allocation. Resident memory is what it was: these
// buffers are written whole when the session is created.
#pragma once

#include <cstddef>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "tern/tern.h"

namespace tern::cpu {

constexpr size_t kHugePageBytes = size_t(2) << 20;
// The alignment every large buffer gets, and all the kernels assume: a cache line, and the widest vector load.
constexpr size_t kLargeAlignment = 64;

// `bytes` bytes aligned to `alignment` (a power of two); a buffer of at least kHugePageBytes starts on a huge page
// and its whole huge pages are marked for huge pages. Null when out of memory. Freed by free_large.
void* allocate_large(size_t alignment, size_t bytes);
void free_large(void* p);

// Where a CPU session's large buffers come from: the app's tern_allocator (tern_session_options.allocator), or
// allocate_large when it gave none. One per session, outliving every buffer allocated through it.
class BufferSource {
 public:
  explicit BufferSource(const tern_allocator* app) : app_(app != nullptr) {
    if (app) allocator_ = *app;
  }
  BufferSource(const BufferSource&) = delete;
  BufferSource& operator=(const BufferSource&) = delete;
  // Null when refused (refusal() then says what was asked).
  void* allocate(size_t bytes, size_t alignment);
  void release(void* p, size_t bytes) const;
  // For TERN_OUT_OF_MEMORY: "the app's allocator (tern_session_options.allocator) returned NULL for N bytes
  // (alignment 64)", or the library's own allocator's; "" before any refusal.
  std::string refusal() const;

 private:
  bool app_;
  tern_allocator allocator_{};
  size_t refused_bytes_ = 0, refused_alignment_ = 0;
};

// For a message on a failed allocation: ": " and source's refusal, or "" (no source, or no refusal).
inline std::string refusal_note(const BufferSource* source) {
  const std::string refusal = source ? source->refusal() : "";
  return refusal.empty() ? "" : ": " + refusal;
}

// std::vector's allocator on a session's BufferSource, or on allocate_large where it has none (null).
template <typename T>
struct LargeAllocator {
  using value_type = T;
  // A vector moved or swapped keeps the source of its buffer.
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using propagate_on_container_copy_assignment = std::true_type;
  LargeAllocator() = default;
  explicit LargeAllocator(BufferSource* source) : source(source) {}
  template <typename U>
  LargeAllocator(const LargeAllocator<U>& other) : source(other.source) {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_alloc();
    const size_t alignment = alignof(T) < kLargeAlignment ? kLargeAlignment : alignof(T);
    void* p = source ? source->allocate(n * sizeof(T), alignment) : allocate_large(alignment, n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (source) {
      source->release(p, n * sizeof(T));
    } else {
      free_large(p);
    }
  }
  template <typename U>
  bool operator==(const LargeAllocator<U>& other) const { return source == other.source; }
  template <typename U>
  bool operator!=(const LargeAllocator<U>& other) const { return source != other.source; }

  BufferSource* source = nullptr;
};

template <typename T>
using LargeVector = std::vector<T, LargeAllocator<T>>;

// An empty vector whose buffers will come from `source` (null: allocate_large).
template <typename T>
LargeVector<T> large_vector(BufferSource* source) {
  return LargeVector<T>(LargeAllocator<T>(source));
}

}  // namespace tern::cpu
