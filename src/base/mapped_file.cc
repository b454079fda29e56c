#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "base/check.h"

namespace redline {

MappedFile::~MappedFile() {
  if (data_ != nullptr && size_ > 0) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr && size_ > 0)
      munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string m = "cannot open " + path + ": " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(m) : Status::IoError(m);
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    std::string m = "cannot stat " + path + ": " + std::strerror(errno);
    ::close(fd);
    return Status::IoError(m);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(path + " is not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string m = "cannot mmap " + path + ": " + std::strerror(errno);
      ::close(fd);
      f.size_ = 0;
      return Status::IoError(m);
    }
    f.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

Status MappedFile::Lock() {
  if (size_ == 0) return Status::Ok();
  if (mlock(data_, size_) != 0) {
    return Status::ResourceExhausted(std::string("mlock of ") + path_ +
                                     " failed: " + std::strerror(errno) +
                                     " (raise ulimit -l)");
  }
  return Status::Ok();
}

void MappedFile::Prefetch() const {
  if (size_ > 0) madvise(const_cast<uint8_t*>(data_), size_, MADV_WILLNEED);
}

void MappedFile::Release(const void* begin, size_t bytes) const {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(begin);
  const auto lo = reinterpret_cast<uintptr_t>(data_);
  // A range outside the mapping would drop someone else's memory (for
  // anonymous pages, their contents): always checked.
  RL_CHECK(first >= lo && first + bytes <= lo + size_)
      << "range outside the mapping of " << path_;
  const uintptr_t start = (first + page - 1) / page * page;
  const uintptr_t end = (first + bytes) / page * page;
  // Advice only: if the kernel refuses, the pages merely stay resident.
  if (start < end)
    madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

}  // namespace redline
