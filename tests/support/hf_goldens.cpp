// SPDX-License-Identifier: MIT
#include "hf_goldens.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace tern::test {

std::vector<std::string> hf_goldens() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(source_path("tests/goldens"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("hf_", 0) == 0 && fs::exists(e.path() / "config.json")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

tern_model* convert_and_load(const std::string& dir, const std::string& name, const convert::ConvertOptions& options) {
  const std::string out = scratch_dir(name) + "/model.tern";
  const Status st = convert::convert_checkpoint(dir, out, options);
  INFO(name << ": " << st.message());
  REQUIRE(st.ok());
  tern_model* model = nullptr;
  INFO(tern_last_error());
  REQUIRE(tern_model_load(out.c_str(), &model) == TERN_OK);
  return model;
}

std::string rope_type(const std::string& dir) {
  const nlohmann::json c = nlohmann::json::parse(read_file(dir + "/config.json"));
  if (!c.contains("rope_scaling") || !c["rope_scaling"].is_object()) return "default";
  const nlohmann::json& s = c["rope_scaling"];
  return s.value("rope_type", s.value("type", std::string("default")));
}

}  // namespace tern::test
