// trainerd's log under systemd: the real daemon, its stderr a file that $JOURNAL_STREAM names
// (as systemd sets it for a service), sends journal entries over the native protocol to
// /run/systemd/journal/socket. The test plays journald on that socket, in a private mount
// namespace with a tmpfs on /run, so it neither needs nor disturbs a journald on the machine.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../support/datagram_socket.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"
#include "trainerd/store/store.h"

namespace trainerd {
namespace {

using Entry = std::map<std::string, std::string>;

// One datagram of the journal's native protocol: "KEY=value\n" fields, or "KEY\n" followed by
// a little-endian 64-bit length, the value and "\n" for values holding a newline.
Entry ParseEntry(const std::string& datagram) {
  Entry entry;
  std::size_t at = 0;
  while (at < datagram.size()) {
    const std::size_t newline = datagram.find('\n', at);
    if (newline == std::string::npos) break;
    const std::string line = datagram.substr(at, newline - at);
    if (const std::size_t eq = line.find('='); eq != std::string::npos) {
      entry[line.substr(0, eq)] = line.substr(eq + 1);
      at = newline + 1;
      continue;
    }
    std::uint64_t length = 0;
    for (int i = 7; i >= 0; --i) {
      length = (length << 8) | static_cast<unsigned char>(datagram[newline + 1 + i]);
    }
    entry[line] = datagram.substr(newline + 9, length);
    at = newline + 9 + length + 1;
  }
  return entry;
}

class JournalLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // This test process (and the daemon it starts) gets its own /run; nothing else does.
    if (::unshare(CLONE_NEWNS) != 0) {
      GTEST_SKIP() << "needs a private mount namespace (CAP_SYS_ADMIN): " << std::strerror(errno);
    }
    ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0)
        << std::strerror(errno);
    ASSERT_EQ(::mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"), 0) << std::strerror(errno);
    std::filesystem::create_directories("/run/systemd/journal");
    journal_ = std::make_unique<testing::DatagramSocket>("/run/systemd/journal/socket");
    ASSERT_TRUE(journal_->bound());

    testing::TinyGptYamlOptions job;
    job.updates = 12;
    job.eval_interval = 6;
    job.checkpoint_interval = 6;
    dir_.Write("job.yaml", testing::TinyGptYaml(job));
    dir_.Write(
        "trainerd.yaml",
        "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"\"}\n"
        "regression: {throughput_tolerance: 95%, beat_baseline: false}\nparity: {updates: 2}\n");
  }

  // Runs `trainerd --once` with stderr in a file; `journal_stream` is the value of
  // $JOURNAL_STREAM, or "stderr" for the file's own device and inode. Returns the exit code.
  int RunOnce(const std::string& journal_stream) {
    const std::string stderr_path = dir_.File("stderr.log");
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    struct stat st {};
    ::fstat(err, &st);
    const std::string value = journal_stream == "stderr"
                                  ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)
                                  : journal_stream;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(err, STDERR_FILENO);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::setenv("JOURNAL_STREAM", value.c_str(), 1);
      const std::string config = dir_.File("trainerd.yaml");
      ::execl(TRAINERD_PATH, TRAINERD_PATH, "--config", config.c_str(), "--once", nullptr);
      ::_exit(127);
    }
    ::close(err);
    int status = 0;
    ::waitpid(pid, &status, 0);
    usleep(300000);  // the reader thread's last receive
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::vector<store::Event> RunOneEvents() {
    auto store = store::Store::OpenReadOnly(dir_.File("state/trainerd.db"), {});
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return {};
    auto events = (*store)->GetRunEvents(1);
    EXPECT_TRUE(events.ok());
    return events.ok() ? *events : std::vector<store::Event>{};
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::DatagramSocket> journal_;
};

TEST_F(JournalLogTest, UnderSystemdEveryLineIsAJournalEntryWithItsPriorityRunAndEvent) {
  ASSERT_EQ(RunOnce("stderr"), 0) << testing::ReadFile(dir_.File("stderr.log"));

  std::vector<Entry> entries;
  for (const std::string& datagram : journal_->Messages()) entries.push_back(ParseEntry(datagram));
  ASSERT_FALSE(entries.empty()) << "nothing reached the journal; stderr:\n"
                                << testing::ReadFile(dir_.File("stderr.log"));
  std::vector<std::string> run_one_events;
  for (const Entry& e : entries) {
    EXPECT_EQ(e.at("SYSLOG_IDENTIFIER"), "trainerd");
    ASSERT_TRUE(e.count("MESSAGE") && e.count("PRIORITY"));
    const int priority = std::stoi(e.at("PRIORITY"));
    EXPECT_TRUE(priority >= 0 && priority <= 7) << priority;
    if (e.count("EVENT") && e.count("RUN_ID") && e.at("RUN_ID") == "1") {
      run_one_events.push_back(e.at("EVENT"));
    }
  }
  // Every event the cycle recorded for run 1 is in the journal with RUN_ID=1 and its kind, in
  // the order of the store, at the priority of its severity.
  std::vector<std::string> stored;
  for (const store::Event& e : RunOneEvents()) stored.push_back(e.kind);
  ASSERT_FALSE(stored.empty());
  EXPECT_EQ(run_one_events, stored);
  for (const Entry& e : entries) {
    if (e.count("EVENT") && e.at("EVENT") == "released") {
      EXPECT_EQ(e.at("PRIORITY"), "6");
    }
  }
  // The cycle's summary closes the log, at notice priority: the model was released.
  EXPECT_EQ(entries.back().at("PRIORITY"), "5") << entries.back().at("MESSAGE");
  // Nothing was written past the journal.
  EXPECT_EQ(testing::ReadFile(dir_.File("stderr.log")), "");
}

TEST_F(JournalLogTest, OutsideSystemdTheLogIsPlainLinesOnStderr) {
  // $JOURNAL_STREAM inherited from a service but naming another file: stderr is not the
  // journal (systemd's rule), so nothing is sent to it.
  ASSERT_EQ(RunOnce("1:1"), 0) << testing::ReadFile(dir_.File("stderr.log"));
  EXPECT_TRUE(journal_->Messages().empty());
  const std::string log = testing::ReadFile(dir_.File("stderr.log"));
  for (const store::Event& e : RunOneEvents()) {
    EXPECT_NE(log.find("trainerd: run 1: " + e.kind + ": "), std::string::npos) << e.kind << "\n"
                                                                                << log;
  }
}

}  // namespace
}  // namespace trainerd
