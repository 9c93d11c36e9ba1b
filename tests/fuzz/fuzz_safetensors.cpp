// SPDX-License-Identifier: MIT
// Fuzz target: a safetensors file from an untrusted checkpoint. Parses and validates the header, then converts
// every float tensor to F32 as an importer would.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "safetensors.h"

using tern::convert::SafetensorsFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy: AddressSanitizer then catches a read one byte past the end.
  std::vector<uint8_t> bytes(data, data + size);
  auto file = SafetensorsFile::parse(bytes.data(), bytes.size(), "fuzz.safetensors");
  if (!file.ok()) return 0;
  std::vector<float> out;
  for (const auto& t : file.value()->tensors()) {
    out.resize(size_t(t.numel()));
    // A tensor that does not convert is an outcome like any other here: the fuzzer looks for crashes and bad reads.
    (void)tern::convert::to_f32(t, out.data());
  }
  return 0;
}
