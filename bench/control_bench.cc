// Control socket latency under load: a real trainerd (`--once`, a tiny job long enough to
// train for the whole measurement) in a temporary state directory; while its worker trains,
// N client threads each send `status` requests one after another, a new connection per
// request as trainerctl does, and every round trip is timed. Prints one JSON object.
// With --idle the daemon waits for a window 12 h away instead: the same requests with no
// worker lines to read and no store commits on the loop, the baseline of the loaded case.
//
//   control_bench [--trainerd PATH] [--clients 1,50] [--requests N] [--think-ms T] [--idle]
//                 [--slow-fsync-ms MS]
//     --trainerd PATH  the daemon (default: the one built with this driver; the worker is
//                      always the trainer-run built with it)
//     --clients LIST   concurrent client counts, measured in this order (default 1,50)
//     --requests N     requests per client (default 200)
//     --think-ms T     pause between one client's requests (default 0: back to back, a
//                      saturation test; 50 clients x 20 ms is 2500 requests/s offered)
//     --slow-fsync-ms MS  every fsync of the daemon (its store commits) first sleeps MS
//                      milliseconds, as on a rotating disk (slow_fsync.cc, preloaded)
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "trainerd/common/proc_file.h"
#include "trainerd/daemon/control_client.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "control_bench: %s\n", message.c_str());
  std::exit(1);
}

struct Options {
  std::string trainerd = TRAINERD_PATH;
  std::vector<int> clients = {1, 50};
  int requests = 200;
  int think_ms = 0;
  bool idle = false;
  int slow_fsync_ms = 0;
};

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--idle") {
      o.idle = true;
      continue;
    }
    if (i + 1 >= argc) {
      Fail("usage: control_bench [--trainerd PATH] [--clients 1,50] [--requests N] [--think-ms T]");
    }
    const std::string value = argv[++i];
    if (arg == "--trainerd") {
      o.trainerd = value;
    } else if (arg == "--clients") {
      o.clients.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');) o.clients.push_back(std::stoi(item));
    } else if (arg == "--requests") {
      o.requests = std::stoi(value);
    } else if (arg == "--think-ms") {
      o.think_ms = std::stoi(value);
    } else if (arg == "--slow-fsync-ms") {
      o.slow_fsync_ms = std::stoi(value);
    } else {
      Fail("unknown option " + arg);
    }
  }
  return o;
}

// A daemon whose one cycle trains a 2-block GPT for far longer than the measurement, or,
// `idle`, one whose next window opens in 12 hours.
class BenchDaemon {
 public:
  BenchDaemon(const std::string& trainerd, bool idle, int slow_fsync_ms) : idle_(idle) {
    char pattern[] = "/tmp/control-bench-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) Fail("mkdtemp failed");
    dir_ = pattern;
    std::ofstream(dir_ / "job.yaml")
        << "model: {kind: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}\n"
           "data:\n  files: [/usr/share/common-licenses/GPL-3, "
           "/usr/share/common-licenses/Apache-2.0]\n"
           "optimizer: {lr: 0.003}\n"
           "training: {effective_batch: 8, updates: 1000000, checkpoint_interval: 1000, "
           "eval_interval: 1000000}\n"
           "plan: {microbatch: 8}\nruntime: {threads: 1}\n";
    std::ofstream(dir_ / "trainerd.yaml")
        << "job: job.yaml\nstate_dir: state\nmetrics: {listen: \"\"}\n"
           "worker: {path: " TRAINER_RUN_PATH "}\ncontrol: {socket: "
        << (dir_ / "trainerd.sock").string() << "}\nschedule: {window: 6h"
        << (idle ? ", start: \"" + ClockInTwelveHours() + "\"" : std::string()) << "}\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "trainerd.log").string();
      std::freopen(log.c_str(), "w", stderr);
      std::freopen("/dev/null", "w", stdout);
      const std::string config = (dir_ / "trainerd.yaml").string();
      if (slow_fsync_ms > 0) {
        ::setenv("LD_PRELOAD", SLOW_FSYNC_PATH, 1);
        ::setenv("TRAINERD_SLOW_FSYNC_MS", std::to_string(slow_fsync_ms).c_str(), 1);
      }
      if (idle) {
        ::execl(trainerd.c_str(), trainerd.c_str(), "--config", config.c_str(),
                static_cast<char*>(nullptr));
      } else {
        ::execl(trainerd.c_str(), trainerd.c_str(), "--config", config.c_str(), "--once",
                static_cast<char*>(nullptr));
      }
      ::_exit(127);
    }
  }
  ~BenchDaemon() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string socket() const { return (dir_ / "trainerd.sock").string(); }

  // Waits until the worker reports updates (the measurement starts mid-run), or for an idle
  // daemon until it answers; false after five minutes.
  bool WaitUntilReady() const {
    const auto give_up = Clock::now() + std::chrono::minutes(5);
    while (Clock::now() < give_up) {
      auto status = trainerd::daemon::SendControlRequest(socket(), {{"command", "status"}}, 5);
      if (status.ok() && idle_ && status->value("ok", false)) return true;
      if (status.ok() && (*status)["result"]["current_run"].is_object() &&
          (*status)["result"]["current_run"].value("update", 0) > 5) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::ifstream log(dir_ / "trainerd.log");
    std::fprintf(stderr, "control_bench: not ready within 5 minutes; trainerd's log:\n%s\n",
                 std::string(std::istreambuf_iterator<char>(log), {}).c_str());
    return false;
  }

 private:
  // "HH:MM" in UTC, 12 hours from now.
  static std::string ClockInTwelveHours() {
    const std::time_t t = std::time(nullptr) + 12 * 3600;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char text[8];
    std::strftime(text, sizeof text, "%H:%M", &tm);
    return text;
  }

  fs::path dir_;
  pid_t pid_ = -1;
  bool idle_;
};

double Percentile(std::vector<double> sorted, double p) {
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(index, sorted.size() - 1)];
}

nlohmann::json Measure(const std::string& socket, int clients, int requests, int think_ms) {
  std::vector<double> latencies_ms;
  std::mutex mutex;
  int failures = 0;
  std::vector<std::thread> threads;
  const auto started = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      int failed = 0;
      for (int r = 0; r < requests; ++r) {
        const auto t0 = Clock::now();
        auto answer = trainerd::daemon::SendControlRequest(socket, {{"command", "status"}}, 10);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (answer.ok() && answer->value("ok", false)) {
          mine.push_back(ms);
        } else {
          ++failed;
        }
        if (think_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(think_ms));
      }
      std::lock_guard<std::mutex> lock(mutex);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
      failures += failed;
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (latencies_ms.empty()) Fail("every request failed");
  std::sort(latencies_ms.begin(), latencies_ms.end());
  return {{"clients", clients},
          {"think_ms", think_ms},
          {"requests", latencies_ms.size()},
          {"failures", failures},
          {"requests_per_second", static_cast<double>(latencies_ms.size()) / seconds},
          {"p50_ms", Percentile(latencies_ms, 0.50)},
          {"p90_ms", Percentile(latencies_ms, 0.90)},
          {"p99_ms", Percentile(latencies_ms, 0.99)},
          {"max_ms", latencies_ms.back()}};
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = ParseArgs(argc, argv);
  BenchDaemon daemon(options.trainerd, options.idle, options.slow_fsync_ms);
  if (!daemon.WaitUntilReady()) return 1;
  nlohmann::json results = nlohmann::json::array();
  for (const int clients : options.clients) {
    std::fprintf(stderr, "control_bench: %d client(s) x %d status requests\n", clients,
                 options.requests);
    results.push_back(Measure(daemon.socket(), clients, options.requests, options.think_ms));
  }
  const nlohmann::json report = {
      {"benchmark",
       options.idle ? "control_status_latency_idle" : "control_status_latency_during_training"},
      {"cpu_model", trainerd::ProcFileValue("/proc/cpuinfo", "model name")},
      {"cpus", std::thread::hardware_concurrency()},
      {"trainerd", options.trainerd},
      {"slow_fsync_ms", options.slow_fsync_ms},
      {"results", results}};
  std::printf("%s\n", report.dump(2).c_str());
  return 0;
}
