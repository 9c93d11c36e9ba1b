// SPDX-License-Identifier: MIT
#include "safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "format/half.h"
#include "json_text.h"

namespace tern::convert {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // same cap as the reference implementation
constexpr size_t kMaxRank = 64;                     // PyTorch's own limit; a .tern tensor has at most 8

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
std::string snippet(const nlohmann::json& j) { return json_snippet(j); }

struct Span {
  uint64_t begin, end;
  const std::string* name;
};

// Validates one header entry and fills `view` (data pointer left for the caller). Returns a message or "".
std::string parse_entry(const std::string& name, const nlohmann::json& entry, uint64_t data_size, TensorView& view,
                        Span& span) {
  const std::string where = "tensor '" + clip(name) + "': ";
  if (!entry.is_object()) return where + "entry must be an object, got " + snippet(entry);
  auto dt = entry.find("dtype");
  if (dt == entry.end()) return where + "field 'dtype' is missing";
  if (!dt->is_string()) return where + "field 'dtype' must be a string, got " + snippet(*dt);
  const DTypeInfo* info = find_dtype(dt->get<std::string>());
  if (!info) return where + "unknown dtype " + snippet(*dt);

  auto sh = entry.find("shape");
  if (sh == entry.end()) return where + "field 'shape' is missing";
  if (!sh->is_array()) return where + "field 'shape' must be an array, got " + snippet(*sh);
  if (sh->size() > kMaxRank)
    return where + "shape has " + std::to_string(sh->size()) + " dimensions, more than " + std::to_string(kMaxRank);
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

namespace {

// Widens n 2-byte values (F16 or BF16) at `src` to float32.
void widen(StDType dtype, const uint8_t* src, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    if (dtype == StDType::F16) {
      out[i] = half_to_float(h);
    } else {
      const uint32_t bits = uint32_t(h) << 16;
      std::memcpy(&out[i], &bits, 4);
    }
  }
}

// "element 5 (index [1, 1] of shape [2, 4]) is NaN"
std::string describe_element(const TensorView& view, size_t i, float value) {
  std::vector<int64_t> index(view.shape.size());
  uint64_t rest = i;
  for (size_t k = view.shape.size(); k-- > 0;) {
    const uint64_t dim = uint64_t(std::max<int64_t>(view.shape[k], 1));
    index[k] = int64_t(rest % dim);
    rest /= dim;
  }
  const char* what = std::isnan(value) ? "NaN" : value > 0 ? "+infinity" : "-infinity";
  return "element " + std::to_string(i) + " (index " + shape_string(index) + " of shape " + shape_string(view.shape) +
         ") is " + what;
}

}  // namespace

Status to_f32(const TensorView& view, float* out, bool allow_non_finite) {
  const size_t n = size_t(view.numel());
  if (n == 0) return Status::Ok();  // an empty tensor's buffers may be null, which memcpy must not see
  const std::string what = "tensor '" + clip(view.name) + "'";
  if (view.dtype != StDType::F32 && view.dtype != StDType::F16 && view.dtype != StDType::BF16)
    return InvalidModel(view.file + ": " + what + " has dtype " + dtype_name(view.dtype) +
                        "; only F32, F16 and BF16 convert to float32");
  if (view.dtype == StDType::F32) {
    if (view.source) {
      TERN_RETURN_IF_ERROR(view.source->read_at(view.offset, out, n * 4, what));
    } else {
      std::memcpy(out, view.data, n * 4);
    }
  } else if (!view.source) {
    widen(view.dtype, view.data, n, out);
  } else {
    // Through a small buffer: the float32 output is the only full-size copy.
    constexpr size_t kChunk = 1 << 15;  // values
    std::vector<uint8_t> buf(std::min(n, kChunk) * 2);
    for (size_t done = 0; done < n; done += kChunk) {
      const size_t m = std::min(kChunk, n - done);
      TERN_RETURN_IF_ERROR(view.source->read_at(view.offset + 2 * done, buf.data(), 2 * m, what));
      widen(view.dtype, buf.data(), m, out + done);
    }
  }
  if (!allow_non_finite) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &out[i], 4);
      if ((bits & 0x7f800000u) == 0x7f800000u)
        return InvalidModel(view.file + ": " + what + ": " + describe_element(view, i, out[i]) +
                            "; non-finite weights are refused (tern-convert --allow-non-finite converts them)");
    }
  }
  return Status::Ok();
}

namespace {

// The 8-byte prefix: the header length n, checked against the file's size.
Status check_prefix(uint64_t size, uint64_t n, const std::string& fname) {
  if (n > size - 8)
    return InvalidModel(fname + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                        std::to_string(size) + " bytes)");
  if (n > kMaxHeaderBytes)
    return InvalidModel(fname + ": header length " + std::to_string(n) + " exceeds the 100 MiB limit");
  return Status::Ok();
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];
  return n;
}

Status too_short(uint64_t size, const std::string& fname) {
  return InvalidModel(fname + ": file is " + std::to_string(size) + " bytes, too short for a safetensors header");
}

}  // namespace

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path, std::string display_name) {
  if (display_name.empty()) {
    size_t slash = path.find_last_of('/');
    display_name = slash == std::string::npos ? path : path.substr(slash + 1);
  }
  TERN_ASSIGN_OR_RETURN(InputFile input, InputFile::open(path));
  const uint64_t size = input.size();
  if (size < 8) return too_short(size, display_name);
  uint8_t prefix[8];
  TERN_RETURN_IF_ERROR(input.read_at(0, prefix, 8, "the header length"));
  const uint64_t n = read_le64(prefix);
  TERN_RETURN_IF_ERROR(check_prefix(size, n, display_name));
  std::string header(size_t(n), '\0');
  TERN_RETURN_IF_ERROR(input.read_at(8, header.data(), header.size(), "the header"));
  TERN_ASSIGN_OR_RETURN(auto file, from_header(header, size - 8 - n, display_name));
  file->input_ = std::make_unique<InputFile>(std::move(input));
  for (TensorView& view : file->tensors_) {
    view.source = file->input_.get();
    view.offset += 8 + n;
  }
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                                const std::string& display_name) {
  if (size < 8) return too_short(size, display_name);
  const uint64_t n = read_le64(bytes);
  TERN_RETURN_IF_ERROR(check_prefix(size, n, display_name));
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), size_t(n));
  TERN_ASSIGN_OR_RETURN(auto file, from_header(header, uint64_t(size) - 8 - n, display_name));
  const uint8_t* data = bytes + 8 + n;
  for (TensorView& view : file->tensors_) view.data = data + view.offset;
  return file;
}

// Validates the header; each view's offset is relative to the data segment, filled in by the caller.
Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::from_header(std::string_view text, uint64_t data_size,
                                                                      const std::string& fname) {
  auto bad = [&](const std::string& msg) { return InvalidModel(fname + ": " + msg); };
  std::string duplicate;
  auto parsed = parse_json(text, &duplicate);
  if (!parsed.ok()) return bad("header is " + parsed.status().message());
  const nlohmann::json header = std::move(parsed).value();
  if (!header.is_object()) return bad("header must be a JSON object, got " + snippet(header));
  if (!duplicate.empty()) return bad("tensor '" + clip(duplicate) + "' appears twice in the header");

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->name_ = fname;
  std::vector<Span> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("__metadata__ must be an object of strings, got " + snippet(*it));
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return bad("__metadata__ entry '" + clip(m.key()) + "' must be a string, got " + snippet(*m));
        file->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorView view;
    Span span{};
    std::string err = parse_entry(it.key(), *it, data_size, view, span);
    if (!err.empty()) return bad(err);
    view.offset = span.begin;
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
      return bad("tensor '" + clip(*s.name) + "': data_offsets [" + std::to_string(s.begin) + ", " +
                 std::to_string(s.end) + "] overlap tensor '" + clip(*last->name) + "' [" + std::to_string(last->begin) + ", " +
                 std::to_string(last->end) + "]");
    if (!last || s.end > last->end) last = &s;
  }
  std::sort(file->tensors_.begin(), file->tensors_.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  return Result<std::unique_ptr<SafetensorsFile>>(std::move(file));
}

}  // namespace tern::convert
