// SPDX-License-Identifier: MIT
// A checkpoint directory: config.json plus every *.safetensors file in it (a sharded one's
// model.safetensors.index.json, when present, must list every tensor in the file that holds it and name only files
// that are there), each opened read-only (regular files only,
// never blocking) and kept open while the Checkpoint lives.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/status.h"
#include "safetensors.h"

namespace tern::convert {

// config.json holds at most this much; a real one is a few KiB.
constexpr uint64_t kMaxConfigBytes = 16ull << 20;

// A file the conversion reads, by identity: an output that is one of them is refused.
struct InputId {
  dev_t device = 0;
  ino_t inode = 0;
  std::string path;
};

class Checkpoint {
 public:
  // Reads `dir`/config.json and `dir`/*.safetensors (in sorted order). A tensor name in two files is an error, so is
  // a *.safetensors entry that is not a regular file. Unless `allow_non_finite`, read_f32() refuses NaN and infinity.
  static Result<std::unique_ptr<Checkpoint>> open(const std::string& dir, bool allow_non_finite = false);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const std::vector<std::string>& files() const { return file_names_; }

  // The tensor called `name`, or nullptr. Marks it used; the view stays valid while the Checkpoint lives.
  const TensorView* find(const std::string& name) const;
  size_t tensor_count() const { return index_.size(); }
  // Names never passed to find(), sorted.
  std::vector<std::string> unused() const;
  // to_f32() with this checkpoint's policy on non-finite values.
  Status read_f32(const TensorView& view, float* out) const { return to_f32(view, out, allow_non_finite_); }
  // The directory, config.json and every safetensors file.
  const std::vector<InputId>& inputs() const { return inputs_; }

 private:
  // Checks model.safetensors.index.json against the files read, when the directory has one.
  Status check_index();

  std::string dir_;
  nlohmann::json config_;
  std::vector<std::string> file_names_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
  mutable std::set<std::string> used_;
  std::vector<InputId> inputs_;
  bool allow_non_finite_ = false;
};

// "3 checkpoint tensors were not used: a, b, c" (at most `max_names` names, then "and N more"); "" if none.
std::string describe_unused(const std::vector<std::string>& unused, size_t max_names = 5);

}  // namespace tern::convert
