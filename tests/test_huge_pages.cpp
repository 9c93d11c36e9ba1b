// SPDX-License-Identifier: MIT
// cpu/huge_pages.h: large buffers start on a huge page and only their whole huge pages are marked for transparent
// huge pages (Linux: VmFlags "hg" in /proc/self/smaps); small ones are ordinary 64-byte aligned allocations.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "cpu/huge_pages.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

using tern::cpu::kHugePageBytes;

// The VmFlags of the mapping holding address a, or "" when none is found (not Linux).
std::string vm_flags_at(uintptr_t a) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < line.find(' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

#if defined(__linux__)
// Whether this system records the mark at all: a mapping marked by hand shows "hg" (an emulator such as
// qemu-user drops the advice, and a kernel without transparent huge pages refuses it).
bool system_marks_huge_pages() {
  const size_t bytes = 2 * kHugePageBytes;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const bool marked = madvise(m, bytes, MADV_HUGEPAGE) == 0 &&
                      vm_flags_at(reinterpret_cast<uintptr_t>(m)).find(" hg ") != std::string::npos;
  munmap(m, bytes);
  return marked;
}
#endif

}  // namespace

TEST_CASE("huge pages: a small buffer is 64-byte aligned and unmarked") {
  tern::cpu::LargeVector<float> v(1000, 1.0f);
  const auto p = reinterpret_cast<uintptr_t>(v.data());
  CHECK(p % 64 == 0);
  CHECK(v[999] == 1.0f);
  const std::string flags = vm_flags_at(p);
  if (!flags.empty()) CHECK(flags.find(" hg ") == std::string::npos);
}

TEST_CASE("huge pages: a buffer of 3 MiB starts on a huge page, its first 2 MiB marked and its tail not") {
  const size_t floats = 3 * (size_t(1) << 20) / sizeof(float);
  tern::cpu::LargeVector<float> v(floats, 2.0f);
  const auto p = reinterpret_cast<uintptr_t>(v.data());
  CHECK(p % kHugePageBytes == 0);
  CHECK(v[floats - 1] == 2.0f);
#if defined(__linux__)
  if (!system_marks_huge_pages()) {
    WARN("this system does not record MADV_HUGEPAGE: only the alignment is checked");
    return;
  }
  const std::string head = vm_flags_at(p), tail = vm_flags_at(p + kHugePageBytes + 4096);
  REQUIRE(!head.empty());
  REQUIRE(!tail.empty());
  INFO("head: " << head << "\ntail: " << tail);
  CHECK(head.find(" hg ") != std::string::npos);
  CHECK(tail.find(" hg ") == std::string::npos);
#endif
}

TEST_CASE("huge pages: allocate_large honours an alignment above 64, and the allocator refuses a count whose bytes overflow") {
  void* p = tern::cpu::allocate_large(4096, 100);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  tern::cpu::free_large(p);
  CHECK_THROWS_AS(tern::cpu::LargeAllocator<double>().allocate(size_t(-1) / 4), std::bad_alloc);
}
