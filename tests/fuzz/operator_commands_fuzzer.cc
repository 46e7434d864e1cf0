// libFuzzer harness for the control commands that change what the daemon serves: any bytes
// as one request line, parsed as ControlServer does (ParseControlRequest) and, for rollback,
// outcome and release, handled as the daemon handles them (OperatorCommands::Handle, then the
// outcome watch after an accepted import) on a real SQLite run store and real release folders
// with two releases, the second current. Nothing may throw, crash, leak or hit undefined
// behaviour; every answer is {"ok": bool, ...} and serializes; after every request the link
// releases/current names the store's current release (the served model and the record never
// disagree). The store keeps what earlier inputs changed, as a daemon does. Seeds:
// corpus/operator_commands/.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "trainerd/daemon/control_queries.h"
#include "trainerd/daemon/current_release.h"
#include "trainerd/daemon/operator_commands.h"
#include "trainerd/daemon/outcome_watch.h"
#include "trainerd/daemon/state_layout.h"

namespace trainerd::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr double kNow = 1'800'000'000;

class FixedClock final : public daemon::Clock {
 public:
  double Now() const override { return kNow; }
};

struct Fixture {
  daemon::DaemonConfig config;
  FixedClock clock;
  daemon::LocalFileStore files;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<daemon::OutcomeWatch> watch;
  std::unique_ptr<daemon::OperatorCommands> commands;
};
Fixture* fixture = nullptr;

// A night's run and its release folder, released at `at`.
std::int64_t Night(store::Store& s, const std::string& config_hash, char sha, double at) {
  store::RunRecord run;
  run.config_hash = config_hash;
  run.created_at = at;
  run.deadline_at = at + 3600;
  const std::int64_t run_id = Must(s.CreateRun(run), "run");
  const std::string folder =
      daemon::StateLayout(fixture->config.state_dir).ReleaseDir(run_id, std::string(64, sha), true);
  fs::create_directories(folder);
  Must(fixture->files.WriteAtomically(folder + "/model.pt", "model"), "model.pt");
  const std::int64_t release = Must(s.RecordRelease({0, run_id, folder + "/model.pt",
                                                     std::string(64, sha), true, "{}", at, false}),
                                    "release");
  Must(s.SetCurrentRelease(release, at), "current");
  return release;
}

// The folder releases/current resolves to ("" for none) and the store's current release's.
std::pair<std::string, std::string> LinkedAndRecorded() {
  std::error_code ec;
  const fs::path linked =
      fs::canonical(daemon::StateLayout(fixture->config.state_dir).CurrentReleaseLink(), ec);
  const Result<std::optional<store::Release>> current = fixture->store->CurrentRelease();
  Expect(current.ok(), "the store cannot say its current release");
  std::string recorded;
  if (*current) {
    recorded = fs::canonical(fs::path((*current)->artifact_path).parent_path(), ec).string();
  }
  return {ec ? "" : linked.string(), recorded};
}

void RemoveFixture() {
  if (fixture == nullptr) return;
  fixture->commands.reset();
  fixture->watch.reset();
  fixture->store.reset();
  std::error_code ignored;
  fs::remove_all(fs::path(fixture->config.state_dir).parent_path(), ignored);
}

}  // namespace
}  // namespace trainerd::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  using namespace trainerd;
  using namespace trainerd::fuzz;
  // tmpfs when there is one: every accepted outcome import is a synchronous commit.
  const fs::path base =
      fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  std::string pattern = (base / "trainerd-fuzz-operator-XXXXXX").string();
  Expect(::mkdtemp(pattern.data()) != nullptr, "mkdtemp");
  fixture = new Fixture;
  daemon::DaemonConfig& config = fixture->config;
  config.state_dir = pattern + "/state";
  config.job_path = pattern + "/job.yaml";
  config.outcomes.metrics = {{"ctr", true, 0, 1, 0.02}};
  Must(daemon::StateLayout(config.state_dir).CreateDirectories(), "state directory");
  fixture->store = Must(store::Store::Open(config.database_path()), "open");
  store::Store& s = *fixture->store;
  for (const char* hash : {"aaaa1111", "bbbb2222"}) {
    Must(s.RecordConfigVersion(
             {hash, "model: {kind: gpt}\n", kNow - 86400, store::ConfigState::kCandidate}),
         "config");
    Must(s.SetConfigState({hash, store::ConfigState::kKnownGood, "ran", kNow - 86400}), "state");
  }
  Night(s, "aaaa1111", 'a', kNow - 2 * 86400);
  Night(s, "bbbb2222", 'b', kNow - 86400);
  Must(daemon::SyncCurrentReleaseLink(s, fixture->files, config.state_dir), "link");
  fixture->watch =
      std::make_unique<daemon::OutcomeWatch>(config, s, fixture->files, fixture->clock, nullptr);
  fixture->commands = std::make_unique<daemon::OperatorCommands>(
      config, s, fixture->files, fixture->clock, nullptr, *fixture->watch);
  std::atexit(RemoveFixture);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainerd::daemon;
  using trainerd::fuzz::Expect;
  using trainerd::fuzz::fixture;
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  const trainerd::Result<nlohmann::json> request = ParseControlRequest(line);
  if (!request.ok() || !OperatorCommands::Handles((*request)["command"].get<std::string>())) {
    return 0;
  }
  const nlohmann::json response = fixture->commands->Handle(*request);
  Expect(response.is_object() && response.contains("ok") && response["ok"].is_boolean(),
         "answer without a boolean \"ok\"");
  if ((*request)["command"] == "outcome" && response["ok"] == true) {
    (void)fixture->watch->Check();  // as the daemon does after an import
  }
  const std::string written = response.dump() + "\n";  // as ControlServer writes it
  Expect(written.size() > 1, "empty answer");
  const auto [linked, recorded] = trainerd::fuzz::LinkedAndRecorded();
  Expect(linked == recorded, "releases/current names " + linked + ", the store " + recorded);
  return 0;
}
