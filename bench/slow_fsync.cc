// A slow disk for control_bench's fault injection: preloaded (LD_PRELOAD), it makes every
// fsync and fdatasync of the process sleep TRAINERD_SLOW_FSYNC_MS milliseconds before doing
// the real call, as a rotating disk or a busy network volume would. SQLite's commits in
// WAL mode with synchronous=FULL sync the WAL through fsync (or fdatasync).
#include <dlfcn.h>
#include <time.h>

#include <cstdlib>

namespace {

void Delay() {
  static const long milliseconds = [] {
    const char* value = std::getenv("TRAINERD_SLOW_FSYNC_MS");
    return value != nullptr ? std::atol(value) : 0L;
  }();
  const timespec delay{milliseconds / 1000, (milliseconds % 1000) * 1000000};
  nanosleep(&delay, nullptr);
}

template <typename Function>
Function Real(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  static const auto real = Real<int (*)(int)>("fsync");
  Delay();
  return real(fd);
}

extern "C" int fdatasync(int fd) {
  static const auto real = Real<int (*)(int)>("fdatasync");
  Delay();
  return real(fd);
}
