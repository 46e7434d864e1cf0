// A Unix datagram socket standing in for one of systemd's (NOTIFY_SOCKET, the journal's
// /run/systemd/journal/socket), drained by a thread as systemd would: an undrained socket
// fills up and blocks the sender.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trainerd::testing {

class DatagramSocket {
 public:
  explicit DatagramSocket(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof address.sun_path - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    timeval timeout{0, 100000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    reader_ = std::thread([this] {
      std::vector<char> buffer(1 << 16);
      while (!stop_) {
        const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
        if (n <= 0) continue;
        std::lock_guard<std::mutex> lock(mutex_);
        messages_.emplace_back(buffer.data(), n);
      }
    });
  }
  ~DatagramSocket() {
    stop_ = true;
    reader_.join();
    ::close(fd_);
  }
  DatagramSocket(const DatagramSocket&) = delete;
  DatagramSocket& operator=(const DatagramSocket&) = delete;

  bool bound() const { return bound_; }
  // Every message received so far, one per datagram.
  std::vector<std::string> Messages() {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  int fd_;
  bool bound_ = false;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::string> messages_;
  std::thread reader_;
};

}  // namespace trainerd::testing
