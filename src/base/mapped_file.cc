#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

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

}  // namespace redline
