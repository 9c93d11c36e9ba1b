#include "checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace tern::convert {

namespace fs = std::filesystem;

Result<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return IoError(dir + ": no such directory");
  if (!fs::is_directory(dir, ec)) return IoError(dir + ": not a directory");

  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;

  const fs::path config_path = fs::path(dir) / "config.json";
  std::ifstream in(config_path, std::ios::binary);
  if (!in) return IoError(config_path.string() + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  ckpt->config_ = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (ckpt->config_.is_discarded()) return InvalidModel("config.json: not valid JSON");
  if (!ckpt->config_.is_object()) return InvalidModel("config.json: must hold a JSON object");

  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".safetensors" && it->is_regular_file(ec)) names.push_back(p.filename().string());
  }
  if (ec) return IoError(dir + ": cannot list: " + ec.message());
  if (names.empty()) return InvalidModel(dir + ": no .safetensors files");
  std::sort(names.begin(), names.end());

  for (const std::string& name : names) {
    TERN_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open((fs::path(dir) / name).string(), name));
    for (const TensorView& view : file->tensors()) {
      auto [pos, inserted] = ckpt->index_.emplace(view.name, &view);
      if (!inserted)
        return InvalidModel(name + ": tensor '" + view.name + "' is also in " + pos->second->file);
    }
    ckpt->files_.push_back(std::move(file));
  }
  ckpt->file_names_ = std::move(names);
  return Result<std::unique_ptr<Checkpoint>>(std::move(ckpt));
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
  for (size_t i = 0; i < unused.size() && i < max_names; ++i) s += (i ? ", " : "") + unused[i];
  if (unused.size() > max_names) s += " and " + std::to_string(unused.size() - max_names) + " more";
  return s;
}

}  // namespace tern::convert
