// A real child process with its stdout (and optionally stderr) on pipes, for tests of the
// executables: read lines as they come, send signals, wait for the exit status.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace trainerd::testing {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`; stdin is /dev/null.
  explicit ChildProcess(const std::vector<std::string>& argv) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, STDIN_FILENO);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    stdout_ = ::fdopen(out[0], "r");
    stderr_ = ::fdopen(err[0], "r");
  }
  ~ChildProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
    if (stdout_ != nullptr) std::fclose(stdout_);
    if (stderr_ != nullptr) std::fclose(stderr_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Next line of stdout without the newline; nullopt at end of stream.
  std::optional<std::string> ReadLine() {
    char* line = nullptr;
    std::size_t capacity = 0;
    const ssize_t n = ::getline(&line, &capacity, stdout_);
    std::optional<std::string> result;
    if (n >= 0)
      result = std::string(line, static_cast<std::size_t>(n) - (n > 0 && line[n - 1] == '\n'));
    std::free(line);
    return result;
  }
  std::vector<std::string> ReadAllLines() {
    std::vector<std::string> lines;
    while (auto line = ReadLine()) lines.push_back(*line);
    return lines;
  }
  std::string ReadAllStderr() {
    std::string text;
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), stderr_)) > 0) text.append(buffer, n);
    return text;
  }

  void Signal(int signal) { ::kill(pid_, signal); }
  pid_t pid() const { return pid_; }

  // The raw wait status.
  int Wait() {
    if (!status_) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      status_ = status;
    }
    return *status_;
  }
  // Exit code, or -1 when killed by a signal.
  int ExitCode() {
    const int status = Wait();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  std::FILE* stdout_ = nullptr;
  std::FILE* stderr_ = nullptr;
  std::optional<int> status_;
};

// Runs `argv` to its end: its stdout then its stderr, and its exit code in *code.
inline std::string RunToEnd(const std::vector<std::string>& argv, int* code) {
  ChildProcess child(argv);
  std::string out;
  for (const std::string& line : child.ReadAllLines()) out += line + "\n";
  out += child.ReadAllStderr();
  *code = child.ExitCode();
  return out;
}

}  // namespace trainerd::testing
