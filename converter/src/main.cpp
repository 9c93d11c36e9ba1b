// SPDX-License-Identifier: MIT
// tern-convert CHECKPOINT_DIR -o MODEL.tern: command-line front end of convert_checkpoint().
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "convert.h"
#include "format/model.h"  // kQuantBlock
#include "importers/importers.h"
#include "format/temp_file.h"
#include "tern/tern.h"
#include "writer.h"

namespace {

void print_help() {
  std::printf(
      "usage: tern-convert CHECKPOINT_DIR -o MODEL.tern [--weights f32|f16|int8|int4] [--group-size N]\n"
      "                    [--weight-type PATTERN=FORMAT]... [--tokenizer FILE|none] [--quiet] [--hash-seed N]\n"
      "                    [--allow-non-finite]\n"
      "\n"
      "Converts a checkpoint directory (config.json plus one or more *.safetensors files) into a single\n"
      ".tern model file that libtern loads with mmap.\n"
      "\n"
      "options:\n"
      "  -o, --output FILE  the .tern file to write; replaced atomically, left untouched on failure\n"
      "      --weights FORMAT  how weight matrices are stored: f32 (default), f16, int8 (a float32 scale\n"
      "                     per output row, or per group), int4 (groups of 32 inputs, a float16 scale\n"
      "                     each; token embeddings and heads tied to them int8). Norms, biases, positions,\n"
      "                     LSH rotations, routing centroids and matrices under %lld elements stay\n"
      "                     float32; int8/int4 rows not a multiple of 32 go f16\n"
      "      --group-size N  int8/int4: inputs per scale, a multiple of 32 (int8 default: one scale per\n"
      "                     row; int4 default: 32)\n"
      "      --weight-type PATTERN=FORMAT  tensors whose name matches PATTERN (* ? [..]) take FORMAT,\n"
      "                     e.g. --weight-type 'lm_head*=f16'; repeatable, the last match wins\n"
      "      --tokenizer FILE|none  what turns text into ids, carried in the file: a Hugging Face\n"
      "                     tokenizer.json, a SentencePiece model (.model) or a word/character/byte\n"
      "                     symbol list (another .json, see tools/*_vocab.py) (default: tern_vocab.json,\n"
      "                     tokenizer.json, spiece.model or tokenizer.model in CHECKPOINT_DIR, for\n"
      "                     models without a byte vocabulary); none: ids only\n"
      "  -q, --quiet        print nothing but errors\n"
      "      --hash-seed N  Reformer: seed of the LSH rotations drawn when the checkpoint has none\n"
      "                     (default: config.json's hash_seed, else 0; converter/reformer.md)\n"
      "      --allow-non-finite  convert weights that hold NaN or infinity (refused by default: the error\n"
      "                     names the tensor and the index of the first one)\n"
      "  -h, --help         show this help\n"
      "      --version      the converter's version, the .tern format version it writes, its build\n"
      "\n"
      "supported model types (config.json \"model_type\"):\n",
      static_cast<long long>(tern::convert::kMinCompressedElements));
  for (const auto& imp : tern::convert::importers()) std::printf("  %-16s %s\n", imp.model_type, imp.summary);
  std::printf(
      "\n"
      "input: tensors in F32, F16 or BF16; every tensor is checked for presence, dtype and shape.\n"
      "The written file must pass the runtime's loader before it replaces MODEL.tern; on an error, SIGINT,\n"
      "SIGTERM, SIGHUP or SIGQUIT the temporary file is removed and an existing MODEL.tern is kept.\n"
      "output: .tern format version %u: a size-prefixed FlatBuffer (schema/tern.fbs, identifier \"TERN\")\n"
      "holding the op graph and tensor table, followed by a data segment with every weight (float32 or\n"
      "as --weights asks) at a %u-byte aligned offset.\n"
      "\n"
      "exit status: 0 on success, 1 if the conversion failed, 2 for bad usage.\n",
      tern::convert::kFormatVersion, tern::convert::kDataAlignment);
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "tern-convert: error: %s (see tern-convert --help)\n", message.c_str());
  return 2;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string checkpoint_dir, out_path;
  tern::convert::ConvertOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_help();
      return 0;
    } else if (arg == "--version") {
      std::printf("tern-convert %d.%d.%d\nwrites .tern format version %u\nbuild: %s\n", TERN_VERSION_MAJOR,
                  TERN_VERSION_MINOR, TERN_VERSION_PATCH, tern::convert::kFormatVersion, TERN_BUILD_SUMMARY);
      return 0;
    } else if (arg == "-q" || arg == "--quiet") {
      options.quiet = true;
    } else if (arg == "--allow-non-finite") {
      options.allow_non_finite = true;
    } else if (arg == "--weights" || arg.rfind("--weights=", 0) == 0) {
      std::string value;
      if (arg == "--weights") {
        if (i + 1 >= argc) return usage_error("--weights needs f32, f16, int8 or int4");
        value = argv[++i];
      } else {
        value = arg.substr(std::strlen("--weights="));
      }
      if (!tern::convert::parse_weight_format(value, &options.weights.format)) {
        return usage_error("--weights must be f32, f16, int8 or int4, not '" + value + "'");
      }
    } else if (arg == "--group-size") {
      if (i + 1 >= argc) return usage_error("--group-size needs a number");
      char* end = nullptr;
      errno = 0;
      const long long g = std::strtoll(argv[++i], &end, 10);
      if (errno != 0 || end == argv[i] || *end != '\0' || g <= 0 || g % tern::kQuantBlock != 0 || g > (1 << 24)) {
        return usage_error("--group-size needs a positive multiple of 32, got '" + std::string(argv[i]) + "'");
      }
      options.weights.group = g;
    } else if (arg == "--weight-type") {
      if (i + 1 >= argc) return usage_error("--weight-type needs PATTERN=FORMAT");
      const std::string value = argv[++i];
      const size_t eq = value.rfind('=');
      tern::convert::WeightOverride o;
      if (eq == std::string::npos || eq == 0 ||
          !tern::convert::parse_weight_format(value.substr(eq + 1), &o.format)) {
        return usage_error("--weight-type needs PATTERN=FORMAT with FORMAT f32, f16, int8 or int4, got '" + value + "'");
      }
      o.pattern = value.substr(0, eq);
      options.weights.overrides.push_back(o);
    } else if (arg == "--tokenizer") {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') return usage_error("--tokenizer needs a tokenizer file or none");
      const std::string value = argv[++i];
      if (value == "none") {
        options.tokenizer.none = true;
      } else {
        options.tokenizer.path = value;
      }
    } else if (arg == "--hash-seed") {
      if (i + 1 >= argc) return usage_error(arg + " needs a number");
      char* end = nullptr;
      errno = 0;
      const unsigned long long seed = std::strtoull(argv[++i], &end, 10);
      if (errno != 0 || end == argv[i] || *end != '\0' || argv[i][0] == '-') {
        return usage_error("--hash-seed needs a non-negative integer, got '" + std::string(argv[i]) + "'");
      }
      options.hash_seed = uint64_t(seed);
    } else if (arg == "-o" || arg == "--output") {
      if (i + 1 >= argc) return usage_error(arg + " needs a file name");
      out_path = argv[++i];
    } else if (arg.rfind("--output=", 0) == 0) {
      out_path = arg.substr(std::strlen("--output="));
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (checkpoint_dir.empty()) {
      checkpoint_dir = arg;
    } else {
      return usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (checkpoint_dir.empty()) return usage_error("missing CHECKPOINT_DIR");
  if (out_path.empty()) return usage_error("missing -o MODEL.tern");

  tern::remove_temporaries_on_signals();
  tern::convert::ConvertReport report;
  const tern::Status status = tern::convert::convert_checkpoint(checkpoint_dir, out_path, options, &report);
  if (!status.ok()) {
    std::fprintf(stderr, "tern-convert: error: %s\n", status.message().c_str());
    return 1;
  }
  if (!options.quiet) {
    std::printf("%s\n", report.description.c_str());
    const auto& w = report.weights;
    if (options.weights.format != tern::convert::WeightFormat::kF32 || !options.weights.overrides.empty()) {
      std::printf("weights: %s, %lld tensors compressed, %s -> %s\n",
                  tern::convert::weight_format_name(options.weights.format), static_cast<long long>(w.compressed),
                  mib(w.bytes_before).c_str(), mib(w.bytes_after).c_str());
      for (const std::string& note : w.notes) std::printf("  kept wider: %s\n", note.c_str());
    }
    std::printf("tokenizer: %s%s\n", report.tokenizer.c_str(),
                report.tokenizer_path.empty() ? "" : (" (" + report.tokenizer_path + ")").c_str());
    std::printf("wrote %s: %s, %zu tensors, %zu ops, %s in %.2f s\n", out_path.c_str(), report.architecture.c_str(),
                report.tensors, report.ops, mib(report.file_size).c_str(), report.seconds);
  }
  return 0;
}
