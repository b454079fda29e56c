// MappedFile: a read-only memory map of a whole file.
//
// Ownership: owns the mapping; unmapped in the destructor. Move-only.
// Thread-safety: after Open, all methods are const and safe to call from any
// thread. Cost: Open is O(1) (pages are faulted in lazily); Lock() pins every
// page in RAM (mlock) and may take as long as reading the file.
#ifndef REDLINE_BASE_MAPPED_FILE_H_
#define REDLINE_BASE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace redline {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only. Errors: NotFound, IoError (with errno text).
  static Result<MappedFile> Open(const std::string& path);

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Pins the mapping in RAM so it is never swapped out (mlock).
  Status Lock();
  // Asks the kernel to read the whole file ahead (MADV_WILLNEED).
  void Prefetch() const;
  // Drops this process's copies of the whole pages inside
  // [begin, begin + bytes), a range of the mapping (MADV_DONTNEED): they stop
  // counting in its resident memory, and a later read faults them in again
  // from the file. Has no effect on locked pages.
  void Release(const void* begin, size_t bytes) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace redline

#endif  // REDLINE_BASE_MAPPED_FILE_H_
