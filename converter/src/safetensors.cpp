#include "safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/half.h"

namespace tern::convert {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // same cap as the reference implementation

struct DTypeInfo {
  const char* name;
  StDType dtype;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {"F64", StDType::F64, 8}, {"F32", StDType::F32, 4}, {"F16", StDType::F16, 2}, {"BF16", StDType::BF16, 2},
    {"I64", StDType::I64, 8}, {"I32", StDType::I32, 4}, {"I16", StDType::I16, 2}, {"I8", StDType::I8, 1},
    {"U8", StDType::U8, 1},   {"BOOL", StDType::BOOL, 1},
};

const DTypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

// JSON text of a value for messages, cut short so a hostile header cannot flood the terminal.
std::string snippet(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

struct Span {
  uint64_t begin, end;
  const std::string* name;
};

// Validates one header entry and fills `view` (data pointer left for the caller). Returns a message or "".
std::string parse_entry(const std::string& name, const nlohmann::json& entry, uint64_t data_size, TensorView& view,
                        Span& span) {
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object()) return where + "entry must be an object, got " + snippet(entry);
  auto dt = entry.find("dtype");
  if (dt == entry.end()) return where + "field 'dtype' is missing";
  if (!dt->is_string()) return where + "field 'dtype' must be a string, got " + snippet(*dt);
  const DTypeInfo* info = find_dtype(dt->get<std::string>());
  if (!info) return where + "unknown dtype " + snippet(*dt);

  auto sh = entry.find("shape");
  if (sh == entry.end()) return where + "field 'shape' is missing";
  if (!sh->is_array()) return where + "field 'shape' must be an array, got " + snippet(*sh);
  uint64_t numel = 1;
  bool overflow = false;
  view.shape.clear();
  for (const auto& dim : *sh) {
    if (!dim.is_number_unsigned()) return where + "shape " + snippet(*sh) + " must hold non-negative integers";
    uint64_t d = dim.get<uint64_t>();
    if (d > uint64_t(std::numeric_limits<int64_t>::max())) overflow = true;
    if (__builtin_mul_overflow(numel, d, &numel)) overflow = true;
    view.shape.push_back(int64_t(std::min<uint64_t>(d, std::numeric_limits<int64_t>::max())));
  }
  uint64_t need = 0;
  if (overflow || __builtin_mul_overflow(numel, uint64_t(info->size), &need))
    return where + "shape " + snippet(*sh) + " of " + info->name + " is too large";

  auto off = entry.find("data_offsets");
  if (off == entry.end()) return where + "field 'data_offsets' is missing";
  if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
    return where + "data_offsets must be [begin, end] with non-negative integers, got " + snippet(*off);
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  const std::string offsets = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) return where + offsets + " end before they begin";
  if (end > data_size)
    return where + offsets + " run past the end of the data (" + std::to_string(data_size) + " bytes)";
  if (end - begin != need)
    return where + offsets + " hold " + std::to_string(end - begin) + " bytes but shape " +
           shape_string(view.shape) + " of " + info->name + " needs " + std::to_string(need);

  view.name = name;
  view.dtype = info->dtype;
  view.size = size_t(need);
  span = {begin, end, nullptr};
  return "";
}

}  // namespace

const char* dtype_name(StDType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

size_t dtype_size(StDType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d.size;
  return 0;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated against overflow when the file was parsed
  return n;
}

Status to_f32(const TensorView& view, float* out) {
  const size_t n = size_t(view.numel());
  if (n == 0) return Status::Ok();  // an empty tensor's buffers may be null, which memcpy must not see
  switch (view.dtype) {
    case StDType::F32:
      std::memcpy(out, view.data, n * 4);
      return Status::Ok();
    case StDType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, view.data + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      return Status::Ok();
    case StDType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, view.data + 2 * i, 2);
        uint32_t bits = uint32_t(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
      return Status::Ok();
    default:
      return InvalidModel(view.file + ": tensor '" + view.name + "' has dtype " + dtype_name(view.dtype) +
                          "; only F32, F16 and BF16 convert to float32");
  }
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path, std::string display_name) {
  if (display_name.empty()) {
    size_t slash = path.find_last_of('/');
    display_name = slash == std::string::npos ? path : path.substr(slash + 1);
  }
  TERN_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  TERN_ASSIGN_OR_RETURN(auto file, parse(map->data(), map->size(), display_name));
  file->map_ = std::move(map);
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                                const std::string& display_name) {
  const std::string& fname = display_name;
  auto bad = [&](const std::string& msg) { return InvalidModel(fname + ": " + msg); };
  if (size < 8) return bad("file is " + std::to_string(size) + " bytes, too short for a safetensors header");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  const uint64_t avail = uint64_t(size) - 8;
  if (n > avail)
    return bad("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
               " bytes)");
  if (n > kMaxHeaderBytes) return bad("header length " + std::to_string(n) + " exceeds the 100 MiB limit");

  // Parse, noting duplicate top-level keys (nlohmann would silently keep the last one).
  std::string duplicate;
  std::set<std::string> seen;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) duplicate = key;
    }
    return true;
  };
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  nlohmann::json header = nlohmann::json::parse(text, text + n, on_event, /*allow_exceptions=*/false);
  if (header.is_discarded()) return bad("header is not valid JSON");
  if (!header.is_object()) return bad("header must be a JSON object, got " + snippet(header));
  if (!duplicate.empty()) return bad("tensor '" + duplicate + "' appears twice in the header");

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->name_ = fname;
  const uint8_t* data = bytes + 8 + n;
  const uint64_t data_size = avail - n;
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("__metadata__ must be an object of strings, got " + snippet(*it));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return bad("__metadata__ entry '" + m.key() + "' must be a string, got " + snippet(*m));
        file->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorView view;
    Span span{};
    std::string err = parse_entry(it.key(), *it, data_size, view, span);
    if (!err.empty()) return bad(err);
    view.data = data + span.begin;
    view.file = fname;
    file->tensors_.push_back(std::move(view));
    spans.push_back(span);
  }
  for (size_t i = 0; i < spans.size(); ++i) spans[i].name = &file->tensors_[i].name;

  // No two non-empty tensors may share a byte.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  const Span* last = nullptr;
  for (const Span& s : spans) {
    if (s.begin == s.end) continue;
    if (last && s.begin < last->end)
      return bad("tensor '" + *s.name + "': data_offsets [" + std::to_string(s.begin) + ", " + std::to_string(s.end) +
                 "] overlap tensor '" + *last->name + "' [" + std::to_string(last->begin) + ", " +
                 std::to_string(last->end) + "]");
    if (!last || s.end > last->end) last = &s;
  }
  std::sort(file->tensors_.begin(), file->tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  return Result<std::unique_ptr<SafetensorsFile>>(std::move(file));
}

}  // namespace tern::convert
