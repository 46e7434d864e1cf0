// A data file mapped read-only into memory, for datasets that must never be read whole into
// RAM: pages are read as windows or rows touch them. Move-only; unmapped on destruction.
#pragma once

#include <cstddef>
#include <string>

#include "trainerd/common/status.h"

namespace trainerd {

class MappedFile {
 public:
  // NotFound for a missing file, InvalidArgument for one that is not a regular file, IOError
  // when mmap fails; each names the file. `access_random` advises the kernel that reads
  // are scattered (no read-ahead).
  static Result<MappedFile> Open(const std::string& path, bool access_random);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::string path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace trainerd
