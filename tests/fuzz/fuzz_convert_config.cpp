// SPDX-License-Identifier: MIT
// Fuzz target: config.json of an untrusted checkpoint. Writes the input as config.json next to a small valid
// safetensors file (data/convert_config/, tensors of a tiny model of each importer) and converts it. What the
// converter writes must then load: a model it produces that the runtime rejects is a bug, and traps.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "convert.h"
#include "tern/tern.h"

namespace fs = std::filesystem;

namespace {

// A private checkpoint directory per process, removed at exit.
struct CheckpointDir {
  std::string path;
  CheckpointDir() {
    char tmpl[] = "/tmp/tern-fuzz-config-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    path = tmpl;
    fs::copy_file(fs::path(TERN_FUZZ_DATA_DIR) / "convert_config" / "model.safetensors", fs::path(path) / "model.safetensors");
  }
  ~CheckpointDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const CheckpointDir checkpoint;
  const std::string& dir = checkpoint.path;
  {
    std::ofstream f(dir + "/config.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  const std::string out = dir + "/out.tern";
  tern::convert::ConvertOptions options;
  options.quiet = true;
  if (!tern::convert::convert_checkpoint(dir, out, options).ok()) {
    if (fs::exists(out)) __builtin_trap();  // a failed conversion must leave nothing behind
    return 0;
  }
  tern_model* model = nullptr;
  if (tern_model_load(out.c_str(), &model) != TERN_OK) {
    std::fprintf(stderr, "converted model does not load: %s\n", tern_last_error());
    __builtin_trap();
  }
  tern_model_free(model);
  fs::remove(out);
  return 0;
}
