// SPDX-License-Identifier: MIT
// The temporary file a .tern is written into before it is renamed into place, and what guarantees that no
// `*.tmp-*` file outlives a failed or interrupted conversion: the destructor removes it on every error path, and
// in a program that calls remove_temporaries_on_signals() a signal handler removes it on SIGINT, SIGTERM, SIGHUP
// and SIGQUIT before the process dies of the signal. (SIGKILL cannot be caught: nothing can clean up after it.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "format/status.h"

namespace tern {

// For programs (tern-convert, tern-run), not libraries, which leave signals to their host: installs the handlers
// above and ignores SIGXFSZ, so that a write past `ulimit -f` fails with EFBIG, is reported and cleaned up, instead
// of the signal killing the process and leaving the temporary behind. Call it from the thread that creates the
// temporaries (the main thread): a signal another thread takes is handed to that one, which cleans up once, however
// many signals arrive, and only then restores the default action and dies of the signal.
void remove_temporaries_on_signals();

// For programs that run a model mapped from its file (tern-run, tern-bench): a page of the mapping that the file no
// longer holds (the file was truncated, or replaced in place, while in use) raises SIGBUS with BUS_ADRERR. The
// handler removes the temporaries above, writes "<program>: error: <what the model file did>" on stderr and exits
// with status 1, as any other error does, instead of dying of the signal. Other SIGBUS causes keep the default.
void report_truncated_mappings(const char* program);

// "<dir>/<name>.tmp-XXXXXX" for `dest` "<dir>/<name>", with <name> cut (on a UTF-8 boundary) so that the temporary's
// own name fits NAME_MAX however long the destination's is.
std::string temp_template(const std::string& dest);

// What may be replaced by a rename: nothing yet, or a regular file. rename() would otherwise put the new file where a
// device node, a FIFO or a directory's entry was: "'/dev/null' is a character device, not a regular file; refusing
// to replace it". A missing directory is left to TempFile::create to report.
Status check_replaceable(const std::string& dest);

// A temporary next to the destination, removed unless commit() renames it into place. Messages name `dest`, the
// path the user gave, not the temporary.
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  Status create(const std::string& dest);
  Status write(const void* data, size_t n);
  Status pad_to(uint64_t offset);  // zeros up to `offset` bytes in all
  // fsync, close and rename onto the destination; the parent directory is fsynced too (best effort).
  Status commit();

  int fd() const { return fd_; }
  uint64_t written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  void remove();
  std::string dest_;
  std::string path_;
  int fd_ = -1;
  int slot_ = -1;  // in the signal handler's table, or -1
  uint64_t written_ = 0;
};

}  // namespace tern
