// What a path is, in words, for the messages that refuse anything but a regular file: the loader's (mapped_file.cpp),
// the converter's inputs and output (converter/src/input_file.h, temp_file.h) and tern-run's.
#pragma once

#include <sys/stat.h>

namespace tern {

// "a FIFO", "a directory", "a character device", "a block device", "a socket", "a symbolic link", "a regular file".
inline const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace tern
