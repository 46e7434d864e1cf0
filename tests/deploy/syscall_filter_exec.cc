// syscall_filter_exec: runs a program under a seccomp allow-list, the way systemd applies the
// unit's SystemCallFilter= lines, so that tests can show the service still works inside it.
//
// Usage: syscall_filter_exec SYSCALL_FILE PROGRAM [ARGS...]
//   SYSCALL_FILE  the allowed system calls, one name a line (systemd-analyze syscall-filter
//                 names; a name this libseccomp does not know is skipped, as systemd does)
// Any other system call kills the process (SIGSYS): stricter than a unit with
// SystemCallErrorNumber=, exactly what a unit without it does. The filter is inherited by
// every child. Exit 126 when the filter cannot be installed or the program not run.
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: syscall_filter_exec SYSCALL_FILE PROGRAM [ARGS...]\n";
    return 2;
  }
  std::ifstream names(argv[1]);
  if (!names) {
    std::cerr << "syscall_filter_exec: cannot read " << argv[1] << "\n";
    return 126;
  }
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (filter == nullptr) {
    std::cerr << "syscall_filter_exec: seccomp_init failed\n";
    return 126;
  }
  int allowed = 0;
  for (std::string name; std::getline(names, name);) {
    if (name.empty()) continue;
    const int number = seccomp_syscall_resolve_name(name.c_str());
    if (number == __NR_SCMP_ERROR) continue;
    if (const int rc = seccomp_rule_add(filter, SCMP_ACT_ALLOW, number, 0); rc != 0) {
      std::cerr << "syscall_filter_exec: " << name << ": " << std::strerror(-rc) << "\n";
      return 126;
    }
    ++allowed;
  }
  if (const int rc = seccomp_load(filter); rc != 0) {  // sets no_new_privs first
    std::cerr << "syscall_filter_exec: seccomp_load: " << std::strerror(-rc) << "\n";
    return 126;
  }
  seccomp_release(filter);
  std::cerr << "syscall_filter_exec: " << allowed << " system calls allowed\n";
  ::execv(argv[2], argv + 2);
  std::cerr << "syscall_filter_exec: " << argv[2] << ": " << std::strerror(errno) << "\n";
  return 126;
}
