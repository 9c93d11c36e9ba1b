// SPDX-License-Identifier: MIT
#include "checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "json_text.h"

namespace tern::convert {

namespace fs = std::filesystem;

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir, bool allow_non_finite) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return IoError(dir + ": no such directory");
  if (!fs::is_directory(dir, ec)) return IoError(dir + ": not a directory");

  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  ckpt->allow_non_finite_ = allow_non_finite;
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) == 0) ckpt->inputs_.push_back({dst.st_dev, dst.st_ino, dir});

  const std::string config_path = (fs::path(dir) / "config.json").string();
  TERN_ASSIGN_OR_RETURN(InputFile config, InputFile::open(config_path));
  ckpt->inputs_.push_back({config.device(), config.inode(), config_path});
  TERN_ASSIGN_OR_RETURN(const std::string text, config.read_all(kMaxConfigBytes, "a config"));
  auto parsed = parse_json(text);
  if (!parsed.ok()) return InvalidModel("config.json: " + parsed.status().message());
  ckpt->config_ = std::move(parsed).value();
  if (!ckpt->config_.is_object()) return InvalidModel("config.json: must hold a JSON object");

  // Every entry named *.safetensors, whatever it is: one that is not a regular file is an error below, not skipped.
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".safetensors") names.push_back(p.filename().string());
  }
  if (ec) return IoError(dir + ": cannot list: " + ec.message());
  if (names.empty()) return InvalidModel(dir + ": no .safetensors files");
  std::sort(names.begin(), names.end());

  for (const std::string& name : names) {
    TERN_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open((fs::path(dir) / name).string(), name));
    ckpt->inputs_.push_back({file->input()->device(), file->input()->inode(), file->input()->path()});
    for (const TensorView& view : file->tensors()) {
      auto [pos, inserted] = ckpt->index_.emplace(view.name, &view);
      if (!inserted)
        return InvalidModel(name + ": tensor '" + clip(view.name) + "' is also in " + pos->second->file);
    }
    ckpt->files_.push_back(std::move(file));
  }
  ckpt->file_names_ = std::move(names);
  TERN_RETURN_IF_ERROR(ckpt->check_index());
  return Result<std::unique_ptr<Checkpoint>>(std::move(ckpt));
}

Status Checkpoint::check_index() {
  const std::string name = "model.safetensors.index.json";
  const std::string path = (fs::path(dir_) / name).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::Ok();
  TERN_ASSIGN_OR_RETURN(InputFile file, InputFile::open(path));
  inputs_.push_back({file.device(), file.inode(), path});
  TERN_ASSIGN_OR_RETURN(const std::string text, file.read_all(kMaxConfigBytes, "an index"));
  auto parsed = parse_json(text);
  if (!parsed.ok()) return InvalidModel(name + ": " + parsed.status().message());
  const nlohmann::json index = std::move(parsed).value();
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return InvalidModel(name + ": must hold an object \"weight_map\" of tensor name -> file");
  const nlohmann::json& map = index["weight_map"];
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it.value().is_string())
      return InvalidModel(name + ": weight_map['" + clip(it.key()) + "'] must be a file name, got " +
                          json_snippet(it.value()));
    const std::string shard = it.value().get<std::string>();
    if (std::find(file_names_.begin(), file_names_.end(), shard) == file_names_.end())
      return InvalidModel(name + ": weight_map puts '" + clip(it.key()) + "' in '" + clip(shard) +
                          "', which is not a .safetensors file of " + dir_);
    auto found = index_.find(it.key());
    if (found == index_.end())
      return InvalidModel(name + ": weight_map lists tensor '" + clip(it.key()) + "' in '" + clip(shard) +
                          "', which has no such tensor");
    if (found->second->file != shard)
      return InvalidModel(name + ": weight_map puts '" + clip(it.key()) + "' in '" + clip(shard) + "', but it is in '" +
                          found->second->file + "'");
  }
  for (const auto& [tensor, view] : index_)
    if (!map.contains(tensor))
      return InvalidModel(name + ": weight_map does not list tensor '" + clip(tensor) + "' of '" + view->file + "'");
  return Status::Ok();
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  used_.insert(name);
  return it->second;
}

std::vector<std::string> Checkpoint::unused() const {
  std::vector<std::string> out;
  for (const auto& [name, view] : index_)
    if (!used_.count(name)) out.push_back(name);
  return out;
}

std::string describe_unused(const std::vector<std::string>& unused, size_t max_names) {
  if (unused.empty()) return "";
  std::string s = std::to_string(unused.size()) + " checkpoint tensor" + (unused.size() == 1 ? " was" : "s were") +
                  " not used: ";
  for (size_t i = 0; i < unused.size() && i < max_names; ++i) s += (i ? ", " : "") + clip(unused[i]);
  if (unused.size() > max_names) s += " and " + std::to_string(unused.size() - max_names) + " more";
  return s;
}

}  // namespace tern::convert
