// A checkpoint directory: config.json plus every *.safetensors file in it, all mapped read-only.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "safetensors.h"

namespace tern::convert {

class Checkpoint {
 public:
  // Reads `dir`/config.json and `dir`/*.safetensors (in sorted order). A tensor name in two files is an error.
  static Result<std::unique_ptr<Checkpoint>> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  const std::vector<std::string>& files() const { return file_names_; }

  // The tensor called `name`, or nullptr. Marks it used; the view stays valid while the Checkpoint lives.
  const TensorView* find(const std::string& name) const;
  size_t tensor_count() const { return index_.size(); }
  // Names never passed to find(), sorted.
  std::vector<std::string> unused() const;

 private:
  std::string dir_;
  nlohmann::json config_;
  std::vector<std::string> file_names_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
  mutable std::set<std::string> used_;
};

// "3 checkpoint tensors were not used: a, b, c" (at most `max_names` names, then "and N more"); "" if none.
std::string describe_unused(const std::vector<std::string>& unused, size_t max_names = 5);

}  // namespace tern::convert
