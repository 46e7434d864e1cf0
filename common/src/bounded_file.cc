#include "trainerd/common/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace trainerd {

Result<std::string> ReadBoundedFile(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO without a writer would wait for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    if (errno == ENOENT) return Status::NotFound(path + ": cannot open: no such file");
    return Status::IOError(path + ": cannot open: " + why);
  }
  struct stat st {};
  Status status = Status::Ok();
  std::string text;
  if (::fstat(fd, &st) != 0) {
    status = Status::IOError(path + ": cannot stat: " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = Status::InvalidArgument(path + ": not a regular file");
  } else if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    status = Status::InvalidArgument(path + ": " + std::to_string(st.st_size) +
                                     " bytes, more than the " + std::to_string(max_bytes) +
                                     " this file may have");
  } else {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = Status::IOError(path + ": cannot read: " + std::strerror(errno));
        break;
      }
      if (n == 0) break;  // shrunk while read: what is there now
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

}  // namespace trainerd
