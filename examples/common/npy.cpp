// SPDX-License-Identifier: MIT
#include "npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tern::npy {

std::string header_f32(const std::vector<int64_t>& shape) {
  std::ostringstream dict;
  dict << "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict << shape[i] << (shape.size() == 1 || i + 1 < shape.size() ? "," : "") << (i + 1 < shape.size() ? " " : "");
  dict << "), }";
  std::string header = dict.str();
  // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, ending in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const uint16_t len = uint16_t(header.size());
  const char magic[10] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0, char(len & 0xff), char(len >> 8)};
  return std::string(magic, 10) + header;
}

bool write_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape, std::string* error) {
  size_t count = 1;
  for (int64_t d : shape) count *= size_t(d);
  const std::string header = header_f32(shape);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    *error = "cannot write '" + path + "'";
    return false;
  }
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(count * sizeof(float)));
  if (!out) {
    *error = "write to '" + path + "' failed";
    return false;
  }
  return true;
}

bool read_f32(const std::string& path, Array* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open '" + path + "'";
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    *error = path + ": not a .npy file";
    return false;
  }
  size_t header_len, header_start;
  if (bytes[6] == 1) {
    header_len = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    header_start = 10;
  } else {
    if (bytes.size() < 12) {
      *error = path + ": truncated header";
      return false;
    }
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    header_start = 12;
  }
  if (header_start + header_len > bytes.size()) {
    *error = path + ": truncated header";
    return false;
  }
  std::string header = bytes.substr(header_start, header_len);
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos) {
    *error = path + ": only little-endian float32 C-order arrays are supported";
    return false;
  }
  size_t lp = header.find('('), rp = header.find(')');
  if (lp == std::string::npos || rp == std::string::npos || rp < lp) {
    *error = path + ": no shape in header";
    return false;
  }
  out->shape.clear();
  std::stringstream shape(header.substr(lp + 1, rp - lp - 1));
  std::string item;
  size_t count = 1;
  while (std::getline(shape, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    int64_t d = std::stoll(item);
    if (d < 0) {
      *error = path + ": negative dimension";
      return false;
    }
    out->shape.push_back(d);
    count *= size_t(d);
  }
  size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != count * sizeof(float)) {
    *error = path + ": data size does not match the shape";
    return false;
  }
  out->data.resize(count);
  std::memcpy(out->data.data(), bytes.data() + data_start, count * sizeof(float));
  return true;
}

}  // namespace tern::npy
