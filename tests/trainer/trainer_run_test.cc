// The trainer-run executable as a user and the daemon run it: real process, real signals.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "../support/child_process.h"
#include "../support/event_lines.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job.h"

namespace trainerd {
namespace {

using testing::ChildProcess;
using testing::Events;

TEST(TrainerRunTest, HelpDocumentsExitCodes) {
  ChildProcess child({TRAINER_RUN_PATH, "--help"});
  const auto lines = child.ReadAllLines();
  EXPECT_EQ(child.ExitCode(), 0);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  EXPECT_NE(text.find("--resume"), std::string::npos);
  EXPECT_NE(text.find("75  interrupted"), std::string::npos);
}

TEST(TrainerRunTest, UsageErrorsExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus"}, "unknown argument '--bogus'"},
      {{"--config", "job.yaml", "--for-parity"}, "--for-parity only goes with --plan-only"},
  };
  for (const auto& [args, error] : cases) {
    std::vector<std::string> argv = {TRAINER_RUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess child(argv);
    child.ReadAllLines();
    EXPECT_NE(child.ReadAllStderr().find(error), std::string::npos) << error;
    EXPECT_EQ(child.ExitCode(), 2) << error;
  }
}

TEST(TrainerRunTest, BadConfigExitsTwoWithAnErrorEventNamingFileAndKey) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(5) + "colour: blue\n");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir.File("out")});
  const auto events = Events(child.ReadAllLines());
  const std::string stderr_text = child.ReadAllStderr();
  EXPECT_EQ(child.ExitCode(), 2);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["event"], "error");
  EXPECT_EQ(events[0]["kind"], "config");
  EXPECT_NE(stderr_text.find("job.yaml:9: colour: unknown key"), std::string::npos) << stderr_text;
}

TEST(TrainerRunTest, BadDataExitsThree) {
  testing::TempDir dir;
  std::string yaml = testing::TinyGptYaml(5);
  yaml.replace(yaml.find("/GPL-3"), 6, "/NO-SUCH-LICENCE");
  ChildProcess child({TRAINER_RUN_PATH, "--config", dir.Write("job.yaml", yaml)});
  const auto events = Events(child.ReadAllLines());
  EXPECT_EQ(child.ExitCode(), 3);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["kind"], "data");
  EXPECT_NE(events.back()["message"].get<std::string>().find("NO-SUCH-LICENCE"), std::string::npos);
}

// The daemon has no torch: it learns the training device from this report.
TEST(TrainerRunTest, DeviceInfoPrintsTheTrainingDeviceAsOneJsonObject) {
  testing::TempDir dir;
  ChildProcess child({TRAINER_RUN_PATH, "--config", dir.Write("job.yaml", testing::TinyGptYaml(5)),
                      "--device-info"});
  const auto lines = child.ReadAllLines();
  EXPECT_EQ(child.ExitCode(), 0);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json report = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(report["device_info"]["type"], "cpu");
  EXPECT_GT(report["device_info"]["total_memory_bytes"].get<std::int64_t>(), 1LL << 30);
}

TEST(TrainerRunTest, DataProfileReportsIdsBeyondTheVocabularyInsteadOfRefusingThem) {
  testing::TempDir dir;
  // uint16 ids 0..299, 10 times each, for a GPT of vocabulary 256: 440 ids it cannot predict.
  std::string ids;
  for (int i = 0; i < 3000; ++i) {
    ids.push_back(static_cast<char>((i % 300) & 0xff));
    ids.push_back(static_cast<char>((i % 300) >> 8));
  }
  const std::string yaml =
      "model: {kind: gpt, n_layer: 1, n_head: 1, n_embd: 16, block_size: 16, vocab_size: 256}\n"
      "data: {format: tokens, train: " +
      dir.Write("train.bin", ids) + ", eval: [" + dir.Write("val.bin", ids) + "]}\n";
  const std::string config = dir.Write("job.yaml", yaml);
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--data-profile", "--json"});
  const auto lines = child.ReadAllLines();
  ASSERT_EQ(child.ExitCode(), 0) << child.ReadAllStderr();
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json report = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(report["vocabulary"], 256);
  EXPECT_EQ(report["ids_beyond_vocabulary"], 440);
  EXPECT_EQ(report["profile"]["train_samples"], 3000);
  EXPECT_EQ(report["profile"]["id_counts"].size(), 300u);
  EXPECT_EQ(report["data_fingerprint"].get<std::string>().size(), 64u);
  // Training the same job refuses the ids (exit 3).
  ChildProcess training({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir.File("out")});
  (void)training.ReadAllLines();
  EXPECT_EQ(training.ExitCode(), 3);
}

TEST(TrainerRunTest, SigtermCheckpointsAndResumeFinishesTheJob) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(400));
  const std::string out = dir.File("out");
  int interrupted_at = 0;
  {
    ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--output-dir", out});
    // Wait for the first update so the signal arrives mid-training.
    while (auto line = child.ReadLine()) {
      if (nlohmann::json::parse(*line)["event"] == "update") break;
    }
    child.Signal(SIGTERM);
    const auto rest = Events(child.ReadAllLines());
    ASSERT_EQ(child.ExitCode(), 75);
    ASSERT_FALSE(rest.empty());
    EXPECT_EQ(rest.back()["event"], "checkpoint");
    EXPECT_EQ(rest.back()["reason"], "signal");
    interrupted_at = rest.back()["update"];
    ASSERT_GT(interrupted_at, 0);
    ASSERT_LT(interrupted_at, 400) << "the job finished before the signal arrived";
  }
  ChildProcess resumed({TRAINER_RUN_PATH, "--config", config, "--output-dir", out, "--resume"});
  const auto events = Events(resumed.ReadAllLines());
  EXPECT_EQ(resumed.ExitCode(), 0);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front()["resumed_from_update"], interrupted_at);
  int updates = 0;
  for (const auto& e : events) updates += e["event"] == "update";
  EXPECT_EQ(updates, 400 - interrupted_at);
  EXPECT_EQ(events.back()["event"], "finish");
  EXPECT_EQ(events.back()["updates"], 400);
}

TEST(TrainerRunTest, TwoRunsOfOneJobWriteByteIdenticalModels) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(3));
  std::vector<std::string> hashes;
  for (const char* out : {"a", "b"}) {
    ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir.File(out)});
    const auto events = Events(child.ReadAllLines());
    ASSERT_EQ(child.ExitCode(), 0);
    hashes.push_back(events.back()["model_sha256"]);
  }
  EXPECT_EQ(hashes[0], hashes[1]) << "model.pt depends on something besides the weights";
}

// Memory accounting in a fresh process: the model's parameters are built after the counting
// allocator is installed, so the live bytes trainer-run reports (and budgets) hold them.
// Before, the allocator was installed at its first use, after the model was built: live
// bytes, every ledger peak and the training limit left the parameters out.
TEST(TrainerRunTest, LiveBytesHoldTheParametersGradientsAndOptimizerState) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(3));
  ChildProcess ledger({TRAINER_RUN_PATH, "--config", config, "--ledger", "--json"});
  const std::vector<std::string> lines = ledger.ReadAllLines();
  ASSERT_EQ(ledger.ExitCode(), 0);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json measured = nlohmann::json::parse(lines[0]);
  const std::int64_t state = measured["parameters_bytes"].get<std::int64_t>() +
                             measured["gradients_bytes"].get<std::int64_t>() +
                             measured["optimizer_state_bytes"].get<std::int64_t>();
  // The update's peak holds that state, the inputs and the activations at once.
  EXPECT_GE(measured["peak_bytes"].get<std::int64_t>(),
            state + measured["inputs_bytes"].get<std::int64_t>() +
                measured["activations_bytes"].get<std::int64_t>());
  ChildProcess training({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir.File("out")});
  int updates = 0;
  for (const nlohmann::json& event : Events(training.ReadAllLines())) {
    if (event["event"] != "update") continue;
    ++updates;
    EXPECT_GE(event["live_bytes"].get<std::int64_t>(), state) << event.dump();
  }
  EXPECT_EQ(training.ExitCode(), 0);
  EXPECT_EQ(updates, 3);
}

TEST(TrainerRunTest, ParityOfAPlanFilePrintsOneJsonVerdict) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(5));
  const std::string plan =
      dir.Write("plan.yaml", "microbatch: 2\ncheckpoint_blocks: all\nprecision: fp32\n");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--plan", plan, "--parity",
                      "--parity-updates", "3", "--json"});
  const auto lines = child.ReadAllLines();
  EXPECT_EQ(child.ExitCode(), 0);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json report = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(report["pass"], true);
  ASSERT_EQ(report["comparisons"].size(), 1u);  // an fp32 plan: its structure is its precision
  const nlohmann::json& comparison = report["comparisons"][0];
  EXPECT_EQ(comparison["judges"], "as planned");
  ASSERT_EQ(comparison["updates"].size(), 3u);
  EXPECT_LE(comparison["updates"][0]["gradient_diff"].get<double>(), 1e-5);
  EXPECT_LT(comparison["worst_ratio"].get<double>(), 1.0);
  EXPECT_TRUE(comparison["tolerances"].contains("tensor_step"));
  EXPECT_EQ(report["plan"]["accumulation_steps"], 4);
  EXPECT_EQ(report["plan"]["checkpoint_blocks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(report["checked_effective_batch"], 8);
  EXPECT_EQ(report["device_info"]["type"], "cpu");  // which device the verdict is about
}

TEST(TrainerRunTest, ParityOfAFaultyTrainerExitsSevenAndSaysWhatDiffers) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(5));
  const std::string plan = dir.Write("plan.yaml", "microbatch: 2\nprecision: fp32\n");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--plan", plan, "--parity",
                      "--parity-updates", "2", "--json", "--test-only-fault",
                      "loss_per_microbatch"});
  const auto lines = child.ReadAllLines();
  EXPECT_EQ(child.ExitCode(), 7);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json report = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(report["pass"], false);
  ASSERT_FALSE(report["failures"].empty());
  EXPECT_NE(report["failures"][0].get<std::string>().find("gradient norm before clipping"),
            std::string::npos)
      << report["failures"].dump();
}

TEST(TrainerRunTest, AnInfiniteGradientStopsWithExitSixBeforeItReachesAnything) {
  testing::TempDir dir;
  testing::TinyGptYamlOptions options;
  options.updates = 4;
  options.checkpoint_interval = 1;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(options));
  const std::string out = dir.File("out");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--output-dir", out,
                      "--test-only-fault", "inf_gradient"});
  const auto events = Events(child.ReadAllLines());
  EXPECT_EQ(child.ExitCode(), 6);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["event"], "error");
  EXPECT_NE(events.back()["message"].get<std::string>().find("with a finite loss"),
            std::string::npos)
      << events.back().dump();
  EXPECT_FALSE(std::filesystem::exists(out + "/model.pt"));
  // The checkpoint of update 1 (the fault strikes from update 2 on) is the last one written,
  // and it holds only finite parameters.
  int checkpoints = 0;
  for (const auto& e : events) checkpoints += e["event"] == "checkpoint";
  EXPECT_EQ(checkpoints, 1);
  torch::serialize::InputArchive archive, model, embedding;
  archive.load_from(out + "/checkpoint.pt");
  archive.read("model", model);
  model.read("token_embedding", embedding);  // the parameter the fault poisons
  torch::Tensor weight;
  ASSERT_TRUE(embedding.try_read("weight", weight));
  EXPECT_TRUE(torch::isfinite(weight).all().item<bool>());
}

TEST(TrainerRunTest, StartEventReportsThePlanFromAPlanFile) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(1));
  const std::string plan = dir.Write(
      "plan.json", R"({"accumulation_steps": 2, "checkpoint_blocks": [1], "precision": "bf16"})");
  ChildProcess child(
      {TRAINER_RUN_PATH, "--config", config, "--plan", plan, "--output-dir", dir.File("out")});
  const auto events = Events(child.ReadAllLines());
  EXPECT_EQ(child.ExitCode(), 0);
  ASSERT_FALSE(events.empty());
  const auto& reported = events.front()["plan"];
  EXPECT_EQ(reported["microbatch"], 4);
  EXPECT_EQ(reported["accumulation_steps"], 2);
  EXPECT_EQ(reported["checkpoint_blocks"], nlohmann::json::array({1}));
  EXPECT_EQ(reported["precision"], "bf16");
}

TEST(TrainerRunTest, InvalidPlanFileExitsTwoNamingTheKey) {
  testing::TempDir dir;
  const std::string config = dir.Write("job.yaml", testing::TinyGptYaml(1));
  const std::string plan = dir.Write("plan.yaml", "checkpoint_blocks: [0, 5]\n");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--plan", plan});
  child.ReadAllLines();
  const std::string error = child.ReadAllStderr();
  EXPECT_EQ(child.ExitCode(), 2);
  EXPECT_NE(error.find("plan.yaml:1: checkpoint_blocks: expected all or none or a list of integers "
                       "in [0, 1], got '5'"),
            std::string::npos)
      << error;
}

TEST(TrainerRunTest, ABudgetTooSmallForTheForcedPlanIsAnOomWithPlanAndLedger) {
  testing::TempDir dir;
  const std::string config =
      dir.Write("job.yaml", testing::TinyGptYaml(3) + "memory: {budget: 1500KiB, reserve: 0%}\n");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir.File("out")});
  const auto events = Events(child.ReadAllLines());
  EXPECT_EQ(child.ExitCode(), 4);
  ASSERT_FALSE(events.empty());
  const nlohmann::json& error = events.back();
  EXPECT_EQ(error["event"], "error");
  EXPECT_EQ(error["kind"], "oom");
  EXPECT_EQ(error["details"]["plan"]["microbatch"], 8);
  EXPECT_EQ(error["details"]["ledger"]["limit_bytes"], 1500 * 1024);
  EXPECT_GT(error["details"]["ledger"]["parameters_bytes"].get<std::int64_t>(), 0);
}

// When not even the named baseline fits, the planner names adapters as the job's own choice for
// a full-training job, and not for a job that trains adapters already.
TEST(TrainerRunTest, WhenNothingFitsThePlannerNamesAdaptersAsTheJobsOwnChoice) {
  testing::TempDir dir;
  for (const bool adapters : {false, true}) {
    const std::string config = dir.Write(
        "job.yaml", testing::TinyGptYaml(3) +
                        (adapters ? "finetune: {method: lora, rank: 2, targets: [qkv]}\n" : ""));
    ChildProcess child(
        {TRAINER_RUN_PATH, "--config", config, "--plan-only", "--json", "--budget", "64KiB"});
    child.ReadAllLines();
    const std::string error = child.ReadAllStderr();
    EXPECT_EQ(child.ExitCode(), 4) << error;
    EXPECT_NE(error.find("does not fit: even the named baseline"), std::string::npos) << error;
    EXPECT_EQ(error.find("finetune: {method: lora}") != std::string::npos, !adapters) << error;
  }
}

TEST(TrainerRunTest, AHostBudgetBelowTheHostStateIsAnOomNamingItBeforeAnyUpdate) {
  testing::TempDir dir;
  const std::string config =
      dir.Write("job.yaml", testing::TinyGptYaml(3) +
                                "plan: {optimizer_state: host}\nmemory: {host_budget: 64KiB}\n");
  ChildProcess child({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir.File("out")});
  const auto events = Events(child.ReadAllLines());
  EXPECT_EQ(child.ExitCode(), 4);
  ASSERT_FALSE(events.empty());
  const nlohmann::json& error = events.back();
  EXPECT_EQ(error["event"], "error");
  EXPECT_EQ(error["kind"], "oom");
  EXPECT_NE(error["message"].get<std::string>().find("memory.host_budget"), std::string::npos)
      << error.dump();
  EXPECT_EQ(error["details"]["plan"]["optimizer_state"], "host");
  for (const nlohmann::json& event : events) EXPECT_NE(event["event"], "update");
  EXPECT_FALSE(std::filesystem::exists(dir.File("out/model.pt")));
}

// The ledger (trainer-run --ledger --json) of `config` under the named baseline's plan
// (microbatch 1, every block checkpointed); null, with a failure, when trainer-run failed.
nlohmann::json BaselineLedger(const testing::TempDir& dir, const std::string& config) {
  const std::string baseline =
      dir.Write("baseline.json", R"({"microbatch": 1, "checkpoint_blocks": "all"})");
  ChildProcess ledger(
      {TRAINER_RUN_PATH, "--config", config, "--plan", baseline, "--ledger", "--json"});
  const std::vector<std::string> lines = ledger.ReadAllLines();
  if (ledger.ExitCode() != 0 || lines.empty()) {
    ADD_FAILURE() << "trainer-run --ledger failed: " << ledger.ReadAllStderr();
    return nullptr;
  }
  return nlohmann::json::parse(lines.back());
}

// A budget below what the job's model state and its least activations need on the device:
// the named baseline's peak less half its optimizer state, on the CPU simulating an
// accelerator (memory.simulated_device). --plan auto keeps the state on the host, trains under
// the budget, and writes the weights the same plan writes with the state on
// the device and no budget, byte for byte.
TEST(TrainerRunTest, PlanAutoKeepsTheOptimizerStateOnTheHostWhenNothingElseFits) {
  testing::TempDir dir;
  const std::string config = dir.Write(
      "job.yaml",
      testing::TinyGptYaml(3) +
          "planner: {precisions: [fp32]}\nmemory: {reserve: 0, simulated_device: true}\n");
  const nlohmann::json measured = BaselineLedger(dir, config);
  ASSERT_FALSE(measured.is_null());
  const std::int64_t budget = measured["peak_bytes"].get<std::int64_t>() -
                              measured["optimizer_state_bytes"].get<std::int64_t>() / 2;
  ::setenv("XDG_CACHE_HOME", dir.File("cache").c_str(), 1);
  ChildProcess planned({TRAINER_RUN_PATH, "--config", config, "--plan", "auto", "--budget",
                        std::to_string(budget), "--output-dir", dir.File("host")});
  const auto events = Events(planned.ReadAllLines());
  ASSERT_EQ(planned.ExitCode(), 0) << planned.ReadAllStderr();
  ASSERT_EQ(events[0]["event"], "plan");
  nlohmann::json plan = events[0]["plan"];
  EXPECT_EQ(plan["optimizer_state"], "host") << plan.dump();
  EXPECT_EQ(events.back()["event"], "finish");
  EXPECT_LE(events.back()["peak_bytes"].get<std::int64_t>(), budget);

  nlohmann::json same_on_device;
  for (const char* key : {"microbatch", "checkpoint_blocks", "precision"}) {
    same_on_device[key] = plan[key];
  }
  const std::string device_plan = dir.Write("device.json", same_on_device.dump());
  ChildProcess unlimited({TRAINER_RUN_PATH, "--config", config, "--plan", device_plan,
                          "--output-dir", dir.File("device")});
  const auto device_events = Events(unlimited.ReadAllLines());
  ::unsetenv("XDG_CACHE_HOME");
  ASSERT_EQ(unlimited.ExitCode(), 0) << unlimited.ReadAllStderr();
  EXPECT_EQ(device_events.back()["model_files"]["weights_sha256"],
            events.back()["model_files"]["weights_sha256"]);
}

// Two ranks under a budget that one rank's whole model state does not fit: the planner shards
// the optimizer state (ZeRO stage 1), each rank then peaks under the budget, and the same plan
// unsharded runs out of memory. The CPU simulates a GPU: the end's checkpoint gathers the whole
// optimizer state into rank 0's host memory, which on a real CPU device is the device's.
TEST(TrainerRunTest, PlanOnlyShardsTheOptimizerStateOfTwoRanksWhenNothingElseFits) {
  testing::TempDir dir;
  const std::string config =
      dir.Write("job.yaml", testing::TinyGptYaml(3) +
                                "planner: {precisions: [fp32], optimizer_states: [device]}\n"
                                "memory: {reserve: 0, simulated_device: true}\n"
                                "distributed: {ranks: 2, timeout: 60s}\n");
  const nlohmann::json measured = BaselineLedger(dir, config);
  ASSERT_FALSE(measured.is_null());
  const std::int64_t budget = measured["peak_bytes"].get<std::int64_t>() -
                              measured["optimizer_state_bytes"].get<std::int64_t>() / 4;
  ::setenv("XDG_CACHE_HOME", dir.File("cache").c_str(), 1);
  ChildProcess planner({TRAINER_RUN_PATH, "--config", config, "--plan-only", "--json", "--budget",
                        std::to_string(budget)});
  const std::vector<std::string> chosen = planner.ReadAllLines();
  ASSERT_EQ(planner.ExitCode(), 0) << planner.ReadAllStderr();
  const nlohmann::json report = nlohmann::json::parse(chosen.back());
  EXPECT_EQ(report["zero_stage"], 1) << report.dump();
  nlohmann::json plan;
  for (const char* key : {"microbatch", "checkpoint_blocks", "precision", "zero_stage"}) {
    plan[key] = report[key];
  }

  const auto train_two_ranks = [&](const nlohmann::json& with, const std::string& out) {
    ChildProcess two({TRAINER_LAUNCH_PATH, "--ranks", "2", "--", TRAINER_RUN_PATH, "--config",
                      config, "--plan", dir.Write(out + ".json", with.dump()), "--budget",
                      std::to_string(budget), "--output-dir", dir.File(out), "--json"});
    auto events = Events(two.ReadAllLines());
    return std::pair{two.ExitCode(), std::move(events)};
  };
  const auto [sharded_exit, sharded] = train_two_ranks(plan, "sharded");
  ::unsetenv("XDG_CACHE_HOME");
  ASSERT_EQ(sharded_exit, 0) << (sharded.empty() ? "no events" : sharded.back().dump());
  ASSERT_EQ(sharded.back()["event"], "finish");
  EXPECT_LE(sharded.back()["peak_bytes"].get<std::int64_t>(), budget);
  plan["zero_stage"] = 0;
  const auto [unsharded_exit, unsharded] = train_two_ranks(plan, "unsharded");
  EXPECT_EQ(unsharded_exit, 4) << "the same plan unsharded fitted the budget";
}

TEST(TrainerRunTest, PlanAutoFitsTheSameBudgetAndTrains) {
  testing::TempDir dir;
  const std::string config = dir.Write(
      "job.yaml", testing::TinyGptYaml(3) +
                      "memory: {budget: 1500KiB, reserve: 0%}\nplanner: {precisions: [fp32]}\n");
  // An empty peak-FLOP/s cache: the probe's matrices must not count against the budget.
  ::setenv("XDG_CACHE_HOME", dir.File("cache").c_str(), 1);
  ChildProcess child(
      {TRAINER_RUN_PATH, "--config", config, "--plan", "auto", "--output-dir", dir.File("out")});
  ::unsetenv("XDG_CACHE_HOME");
  const auto events = Events(child.ReadAllLines());
  EXPECT_EQ(child.ExitCode(), 0) << child.ReadAllStderr();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["event"], "plan");
  EXPECT_LE(events[0]["plan"]["measured_peak_bytes"].get<std::int64_t>(), 1500 * 1024);
  EXPECT_EQ(events[1]["plan"]["microbatch"], events[0]["plan"]["microbatch"]);
  EXPECT_EQ(events.back()["event"], "finish");
  EXPECT_LE(events.back()["peak_bytes"].get<std::int64_t>(), 1500 * 1024);
}

TEST(TrainerRunTest, WhatIfPrintsTheWorkedExample) {
  ChildProcess child({TRAINER_RUN_PATH, "--what-if", "--static", "3.2GB", "--act-per-sample",
                      "0.34GB", "--device", "24GB", "--reserve", "10%", "--microbatch", "32",
                      "--blocks", "10", "--json"});
  const auto lines = child.ReadAllLines();
  EXPECT_EQ(child.ExitCode(), 0);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json result = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(result["max_microbatch"], 54);
  EXPECT_EQ(result["blocks"].size(), 10u);
  EXPECT_EQ(result["fits"], true);
}

// The last eval event of `events` (the first when `initial`): its mean loss.
double EvalLoss(const std::vector<nlohmann::json>& events, bool initial) {
  double loss = -1;
  for (const nlohmann::json& e : events) {
    if (e.value("event", "") != "eval") continue;
    if (e.value("initial", false) == initial) loss = e["mean_loss"].get<double>();
    if (initial && loss >= 0) break;
  }
  return loss;
}

TEST(TrainerRunTest, InitFromAReleaseStartsFromItsWeightsAndEvaluatesThemFirst) {
  testing::TempDir dir;
  const std::string job = dir.Write("job.yaml", testing::TinyGptYaml(5));
  ChildProcess first({TRAINER_RUN_PATH, "--config", job, "--output-dir", dir.File("first")});
  const auto trained = Events(first.ReadAllLines());
  ASSERT_EQ(first.ExitCode(), 0) << first.ReadAllStderr();
  // Continued training from that release's folder: the first eval, before any update, is
  // the released weights on the same held-out data, so it equals the release's final eval.
  ChildProcess next({TRAINER_RUN_PATH, "--config", job, "--output-dir", dir.File("next"),
                     "--init-from", dir.File("first")});
  const auto continued = Events(next.ReadAllLines());
  ASSERT_EQ(next.ExitCode(), 0) << next.ReadAllStderr();
  const double released = EvalLoss(trained, /*initial=*/false);
  ASSERT_GT(released, 0);
  EXPECT_NEAR(EvalLoss(continued, /*initial=*/true), released, 1e-6);
  // Another job: the checkpoint of a run from random weights is not resumed from these.
  const auto start_of = [](const std::vector<nlohmann::json>& events) {
    for (const nlohmann::json& e : events) {
      if (e.value("event", "") == "start") return e;
    }
    return nlohmann::json::object();
  };
  ASSERT_TRUE(start_of(trained).contains("job_identity"));
  EXPECT_NE(start_of(continued)["job_identity"], start_of(trained)["job_identity"]);

  // Weights of another model are refused by tensor name and shape, before training.
  std::string wide_yaml = testing::TinyGptYaml(5);
  wide_yaml.replace(wide_yaml.find("n_embd: 32"), 10, "n_embd: 16");
  const std::string wide_job = dir.Write("wide.yaml", wide_yaml);
  ChildProcess other({TRAINER_RUN_PATH, "--config", wide_job, "--output-dir", dir.File("other"),
                      "--init-from", dir.File("first/model.safetensors")});
  other.ReadAllLines();
  const std::string refused = other.ReadAllStderr();
  EXPECT_EQ(other.ExitCode(), 2);
  EXPECT_NE(
      refused.find(wide_job + ": init_from: " + dir.File("first/model.safetensors") + ": tensor '"),
      std::string::npos)
      << refused;
  EXPECT_NE(refused.find("shape [256, 32] in the file, [256, 16] in the model"), std::string::npos)
      << refused;
  EXPECT_FALSE(std::filesystem::exists(dir.File("other/model.pt")));

  // current_release is the daemon's to resolve.
  const std::string continued_job =
      dir.Write("continued.yaml", testing::TinyGptYaml(5) + "init_from: current_release\n");
  ChildProcess alone({TRAINER_RUN_PATH, "--config", continued_job});
  alone.ReadAllLines();
  const std::string alone_error = alone.ReadAllStderr();
  EXPECT_EQ(alone.ExitCode(), 2);
  EXPECT_NE(alone_error.find("init_from: current_release names trainerd's current release"),
            std::string::npos)
      << alone_error;
}

}  // namespace
}  // namespace trainerd
