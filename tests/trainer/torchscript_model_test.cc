// The team's own model: modules exported by real PyTorch (Debian's python3-torch, through
// examples/torchscript/export_models.py), trained by the LibTorch worker, and loaded back in
// Python.
#include "models/torchscript/torchscript_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../support/child_process.h"
#include "../support/recording_sink.h"
#include "../support/temp_dir.h"
#include "data/text/text_corpus.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/spec/exit_codes.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

namespace trainerd {
namespace {

using testing::RunToEnd;

constexpr int kBlockSize = 16;

// The events named `name` among trainer-run's JSON lines in `out`.
std::vector<nlohmann::json> EventsOf(const std::string& out, const std::string& name) {
  std::vector<nlohmann::json> events;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == name) events.push_back(std::move(event));
  }
  return events;
}

class TorchScriptModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int code = 0;
    const std::string out =
        RunToEnd({TRAINERD_TEST_PYTHON, std::string(TRAINERD_EXAMPLES_DIR) + "/export_models.py",
                  "--out", dir_.path().string(), "--block-size", std::to_string(kBlockSize),
                  "--width", "32", "--updates", "6", "--dropout", "0.1"},
                 &code);
    ASSERT_EQ(code, 0) << out;
  }

  // The example job `name` (lm or classifier), its YAML's first `from` replaced by `to`.
  Result<JobSpec> Job(const std::string& name, const std::string& from = "",
                      const std::string& to = "") const {
    std::string yaml = *ReadText(dir_.File(name + ".yaml"));
    if (!from.empty()) yaml.replace(yaml.find(from), from.size(), to);
    return ParseJobSpecFile(dir_.Write(name + "-job.yaml", yaml));
  }

  static Result<std::string> ReadText(const std::string& path) {
    std::ifstream in(path);
    if (!in) return Status::NotFound(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Resolves the job against its file and corpus, as trainer-run does.
  Status Resolve(JobSpec* spec) {
    Result<TextCorpus> corpus =
        TextCorpus::Load(spec->data.options.get<TextDataKeys>(), spec->model.block_size);
    EXPECT_TRUE(corpus.ok()) << corpus.status().message();
    corpus_ = std::make_unique<TextCorpus>(std::move(corpus).value());
    return ResolveModel(spec, *corpus_);
  }
  JobSpec Resolved(JobSpec spec) {
    Status s = Resolve(&spec);
    if (s.ok()) s = CheckModelFitsData(spec.model, spec.source_path, *corpus_);
    EXPECT_TRUE(s.ok()) << s.message();
    return spec;
  }

  testing::TempDir dir_;
  std::unique_ptr<TextCorpus> corpus_;
};

TEST_F(TorchScriptModelTest, TheBlockProtocolRunsStagedAndEqualsTheModulesOwnForward) {
  const JobSpec spec = Resolved(*Job("lm"));
  EXPECT_EQ(spec.model.loaded->blocks, 2);
  EXPECT_EQ(spec.model.loaded->file_sha256.size(), 64u);
  const TorchScriptKeys keys = spec.model.options.get<TorchScriptKeys>();
  TorchScriptModel model(keys, spec.model.inputs);
  ASSERT_TRUE(model.has_block_protocol()) << model.missing_protocol();
  torch::jit::Module reference = torch::jit::load(keys.path);
  model.eval();
  reference.eval();
  const torch::Tensor tokens = torch::randint(0, 256, {3, kBlockSize}, torch::kLong);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(model.forward(tokens), reference.forward({tokens}).toTensor()));
  std::int64_t scripted = 0;
  for (const torch::Tensor& p : reference.parameters()) scripted += p.numel();
  EXPECT_EQ(CountParameters(model), scripted);
}

TEST_F(TorchScriptModelTest, CheckpointedBlocksWithAccumulationPassParityWithItsDropoutOff) {
  JobSpec spec = Resolved(*Job("lm"));
  spec.plan = {4, 4, {0, 1}, Precision::kFp32};
  Result<ParityReport> report = CheckParity(spec, *corpus_, 2);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->pass) << ToJson(*report).dump();
  EXPECT_EQ(report->own_dropout_switched_off, 2);  // the two blocks' nn.Dropout
  // And it still catches the classic accumulation bug on this model.
  Result<ParityReport> broken = CheckParity(spec, *corpus_, 2, TrainingFault::kLossPerMicrobatch);
  ASSERT_TRUE(broken.ok());
  EXPECT_FALSE(broken->pass);
}

// Its own dropout draws from the default generator: stepped inside the backward with a clip,
// the stepping pass replays the measuring pass's masks, and the updates are the device
// state's (the planner offered this plan and the check between the passes refused it).
TEST_F(TorchScriptModelTest, ItsOwnDropoutStepsInsideTheBackwardAsWithTheStateOnTheDevice) {
  JobSpec spec = Resolved(*Job("lm"));
  spec.plan = {spec.training.effective_batch, 1, {}, Precision::kFp32};
  spec.training.grad_clip = 0.05;
  JobSpec stepped = spec;
  stepped.plan.step_in_backward = true;
  // One after the other: the model's dropout draws from the one default generator, which each
  // trainer seeds when it is built.
  const auto train = [&](const JobSpec& job) {
    NullEventSink discard;
    Trainer trainer(job, *corpus_, &discard);
    std::vector<UpdateStats> stats;
    for (int update = 0; update < 3; ++update) stats.push_back(trainer.TrainUpdate(update));
    return stats;
  };
  const std::vector<UpdateStats> want = train(spec), got = train(stepped);
  for (std::size_t update = 0; update < want.size(); ++update) {
    EXPECT_NEAR(got[update].loss, want[update].loss, 1e-6 * want[update].loss) << update;
    EXPECT_NEAR(got[update].grad_norm, want[update].grad_norm, 1e-6 * want[update].grad_norm)
        << update;
  }
}

// Both artifacts load in Python without trainerd: the scripted module with the trained
// weights, and model.safetensors loaded into the module as exported.
TEST_F(TorchScriptModelTest, TheTrainedModelLoadsInPythonAndGivesTheWorkersOutputs) {
  const JobSpec spec = Resolved(*Job("lm"));
  testing::RecordingSink sink;
  Trainer trainer(spec, *corpus_, &sink);
  TrainerOptions options;
  options.checkpoint_path = dir_.File("checkpoint.pt");
  std::filesystem::create_directories(dir_.path() / "out");
  options.model_path = dir_.File("out/model.pt");
  Result<TrainOutcome> outcome = trainer.Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  ASSERT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
  const nlohmann::json files = sink.Of("finish").at(0)["model_files"];
  EXPECT_EQ(files["weights"], dir_.File("out/model.safetensors"));
  EXPECT_EQ(*Sha256File(dir_.File("out/model.safetensors")), files["weights_sha256"]);

  const torch::Tensor tokens =
      (torch::arange(kBlockSize, torch::kLong) * 7).remainder(256).unsqueeze(0);
  trainer.model().eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor mine = trainer.model().forward(tokens).flatten();
  const std::string evaluate = std::string(TRAINERD_EXAMPLES_DIR) + "/evaluate_release.py";
  const std::string block_size = std::to_string(kBlockSize);
  for (const std::vector<std::string>& python :
       {std::vector<std::string>{TRAINERD_TEST_PYTHON, evaluate, options.model_path, "--inputs",
                                 "tokens", "--block-size", block_size},
        std::vector<std::string>{
            "/usr/bin/env", std::string("PYTHONPATH=") + TRAINERD_TEST_PYTHONPATH,
            TRAINERD_TEST_PYTHON, evaluate, spec.model.options["path"].get<std::string>(),
            "--inputs", "tokens", "--block-size", block_size, "--weights", files["weights"]}}) {
    int code = 0;
    const std::string out = RunToEnd(python, &code);
    ASSERT_EQ(code, 0) << out;
    const std::vector<float> theirs = nlohmann::json::parse(out)["logits"];
    ASSERT_EQ(theirs.size(), static_cast<std::size_t>(mine.numel()));
    EXPECT_LT((mine - torch::tensor(theirs)).abs().max().item<float>(), 1e-5) << python.back();
  }
  // Trained: the weights moved away from the exported ones.
  torch::jit::Module exported = torch::jit::load(spec.model.options["path"].get<std::string>());
  exported.eval();
  EXPECT_FALSE(torch::allclose(exported.forward({tokens}).toTensor().flatten(), mine));
  // The description names every tensor the module has, with its shape.
  const nlohmann::json about = nlohmann::json::parse(*ReadText(files["description"]));
  EXPECT_EQ(about["model"]["kind"], "torchscript");
  EXPECT_EQ(about["files"]["weights"], "model.safetensors");
  EXPECT_EQ(about["files"]["module"], "model.pt");
  std::size_t tensors = 0;
  for (const auto& p : exported.named_parameters()) {
    ++tensors;
    const auto named = std::find_if(about["tensors"].begin(), about["tensors"].end(),
                                    [&](const nlohmann::json& t) { return t["name"] == p.name; });
    ASSERT_NE(named, about["tensors"].end()) << p.name;
    EXPECT_EQ((*named)["shape"].get<std::vector<std::int64_t>>(), p.value.sizes().vec());
  }
  for (const auto& b : exported.named_buffers()) tensors += b.value.defined() ? 1 : 0;
  EXPECT_EQ(about["tensors"].size(), tensors);
}

// The planner's reason to exist, on the team's model: a budget the naive plan (the whole
// batch at once, fp32, nothing checkpointed) exceeds, and the run of the planner's choice
// stays under it.
TEST_F(TorchScriptModelTest, ThePlannerFitsTheModelIntoABudgetItsNaivePlanExceeds) {
  JobSpec spec = Resolved(*Job("lm"));
  spec.planner.precisions = {Precision::kFp32};  // bf16 alone would halve the activations
  Result<MemoryLedger> naive = MeasureLedger(spec, *corpus_);
  ASSERT_TRUE(naive.ok()) << naive.status().message();
  spec.memory.reserve_fraction = 0;
  spec.memory.budget_bytes = naive->peak_bytes * 3 / 4;
  Result<ChosenPlan> chosen = PlanJob(spec, *corpus_);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  EXPECT_TRUE(chosen->fits_memory);
  EXPECT_LE(chosen->measured_peak_bytes, spec.memory.usable_bytes());
  spec.plan = chosen->plan;
  testing::RecordingSink sink;
  Trainer trainer(spec, *corpus_, &sink);
  TrainerOptions options;
  options.checkpoint_path = dir_.File("planned-checkpoint.pt");
  options.model_path = dir_.File("planned.pt");
  ASSERT_TRUE(trainer.Run(options).ok());
  const std::vector<nlohmann::json> finish = sink.Of("finish");
  ASSERT_EQ(finish.size(), 1u);
  EXPECT_LE(finish[0]["peak_bytes"].get<std::int64_t>(), spec.memory.usable_bytes())
      << "naive " << naive->peak_bytes << ", plan " << ToJson(spec.plan).dump();
}

// Issue 51: LibTorch's TorchScript interpreter rethrows an out-of-memory inside the scripted
// model as a std::runtime_error. Training, the planner's validation and its named baseline
// still report it as an out-of-memory (not an internal error), training with what ran out.
TEST_F(TorchScriptModelTest, AnOutOfMemoryInsideTheScriptedModelIsAnOutOfMemoryWithItsPhase) {
  JobSpec spec = Resolved(*Job("lstm"));
  spec.plan = {16, 1, {}, Precision::kFp32};
  Result<MemoryLedger> naive = MeasureLedger(spec, *corpus_);
  ASSERT_TRUE(naive.ok()) << naive.status().message();

  DeviceMemory& memory = MemoryOf(torch::kCPU);
  {
    NullEventSink sink;
    Trainer trainer(spec, *corpus_, &sink);
    // Room for a quarter of one forward's activations: the LSTM blocks run out.
    const ScopedMemoryLimit limited(memory, memory.live_bytes() + naive->activations_bytes / 4);
    TrainerOptions options;
    options.checkpoint_path = dir_.File("oom-checkpoint.pt");
    options.model_path = dir_.File("oom.pt");
    Result<TrainOutcome> outcome = trainer.Run(options);
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kOutOfMemory);
    EXPECT_EQ(outcome->phase, "update");
    EXPECT_NE(outcome->message.find("trainerd CPU budget exceeded"), std::string::npos)
        << outcome->message;
  }
  // trainer-run's error event: kind oom, exit 4, the phase named.
  int code = 0;
  const std::string out = RunToEnd(
      {TRAINER_RUN_PATH, "--config", dir_.File("lstm.yaml"), "--json", "--plan",
       dir_.Write("naive.yaml", "{microbatch: 16, accumulation_steps: 1, precision: fp32}\n"),
       "--budget", std::to_string(naive->peak_bytes / 4), "--output-dir", dir_.File("oom-out")},
      &code);
  EXPECT_EQ(code, exit_code::kOutOfMemory) << out;
  const std::vector<nlohmann::json> errors = EventsOf(out, "error");
  ASSERT_EQ(errors.size(), 1u) << out;
  EXPECT_EQ(errors[0]["kind"], "oom");
  EXPECT_EQ(errors[0]["phase"], "update");

  // The named baseline's trainer and 8 KiB more fit, its first forward (tens of KiB) does not.
  JobSpec baseline = spec;
  baseline.plan = NamedBaselinePlan(spec);
  std::int64_t trainer_bytes = 0;
  {
    NullEventSink sink;
    const Trainer trainer(baseline, *corpus_, &sink);
    trainer_bytes = memory.live_bytes();
  }
  spec.memory.reserve_fraction = 0;
  spec.memory.budget_bytes = trainer_bytes + 8192;
  Result<ChosenPlan> chosen = PlanJob(spec, *corpus_);
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), Status::Code::kOutOfMemory) << chosen.status().message();
}

// Issue 51 as a user met it: an LSTM language model with dropout, exported to TorchScript,
// planned by trainer-run into half the peak of its naive plan (the whole batch at once, fp32,
// nothing checkpointed), then trained under that budget. Before, an out-of-memory of a
// candidate validated under the usable limit ended planning as an internal error.
TEST_F(TorchScriptModelTest, TrainerRunPlansAnLstmIntoHalfItsNaivePeakAndTrainsUnderIt) {
  const std::string wide = dir_.File("wide");
  int code = 0;
  const std::string exported =
      RunToEnd({TRAINERD_TEST_PYTHON, std::string(TRAINERD_EXAMPLES_DIR) + "/export_models.py",
                "--out", wide, "--block-size", "64", "--width", "128", "--updates", "4"},
               &code);
  ASSERT_EQ(code, 0) << exported;
  const std::string config = wide + "/lstm.yaml";
  Result<JobSpec> job = ParseJobSpecFile(config);
  ASSERT_TRUE(job.ok()) << job.status().message();
  JobSpec spec = Resolved(*job);
  spec.plan = {spec.training.effective_batch, 1, {}, Precision::kFp32};
  Result<MemoryLedger> naive = MeasureLedger(spec, *corpus_);
  ASSERT_TRUE(naive.ok()) << naive.status().message();
  const std::int64_t budget = naive->peak_bytes / 2;

  const std::string out =
      RunToEnd({TRAINER_RUN_PATH, "--config", config, "--plan", "auto", "--budget",
                std::to_string(budget), "--json", "--output-dir", dir_.File("wide-out")},
               &code);
  ASSERT_EQ(code, exit_code::kOk) << out;
  const std::vector<nlohmann::json> plan = EventsOf(out, "plan"), finish = EventsOf(out, "finish");
  ASSERT_EQ(plan.size(), 1u) << out;
  ASSERT_EQ(finish.size(), 1u) << out;
  spec.memory.budget_bytes = budget;
  EXPECT_LE(finish[0]["peak_bytes"].get<std::int64_t>(), spec.memory.usable_bytes())
      << plan[0].dump();
}

// Issue 51: what the worker runs before training is outside the budget. Resolving the model
// builds it on the CPU and runs one sample through it (its outputs, the vocabulary of the data
// profile): under a limit that holds nothing more, it still resolves.
TEST_F(TorchScriptModelTest, ResolvingTheModelRunsOutsideTheBudget) {
  Resolved(*Job("lstm"));  // the corpus, read before the limit
  Result<JobSpec> spec = Job("lstm");
  ASSERT_TRUE(spec.ok());
  DeviceMemory& memory = MemoryOf(torch::kCPU);
  const ScopedMemoryLimit nothing_more(memory, memory.live_bytes() + 1);
  const std::int64_t limit = memory.limit();
  const Status s = ResolveModel(&*spec, *corpus_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(spec->model.loaded->output_size, 256);
  EXPECT_EQ(memory.limit(), limit);  // restored for what runs next
}

// Issue 51: the evaluation training runs (its losses, the prediction tally, the simple
// baseline) is the one the ledger counts, so a plan whose evaluation cannot fit is not
// chosen: its peak after real updates stays within the ledger's evaluation peak.
TEST_F(TorchScriptModelTest, TheLedgersEvaluationPeakHoldsTheEvaluationTrainingRuns) {
  JobSpec spec = Resolved(*Job("lstm"));
  spec.plan = {4, 4, {}, Precision::kFp32};
  Result<MemoryLedger> ledger = MeasureLedger(spec, *corpus_);
  ASSERT_TRUE(ledger.ok()) << ledger.status().message();
  NullEventSink sink;
  Trainer trainer(spec, *corpus_, &sink);
  DeviceMemory& memory = MemoryOf(trainer.device());
  const std::optional<int> stepped = trainer.TrainUntilStepped(0);
  ASSERT_TRUE(stepped);
  trainer.TrainUpdate(*stepped);
  memory.ResetPeak();
  const std::vector<SliceLoss> evaluated = trainer.Evaluate();
  ASSERT_TRUE(evaluated.at(0).baseline_loss && evaluated.at(0).predictions);
  EXPECT_LE(memory.peak_bytes(), ledger->evaluation_peak_bytes);
}

TEST_F(TorchScriptModelTest, AModuleWithoutTheProtocolTrainsAsOneBlockThatNoPlanCheckpoints) {
  JobSpec spec = Resolved(*Job("classifier"));
  EXPECT_EQ(spec.model.loaded->blocks, 0);
  NullEventSink sink;
  Trainer trainer(spec, *corpus_, &sink);
  EXPECT_TRUE(std::isfinite(trainer.TrainUpdate(0).loss));
  for (const auto& p : trainer.model().named_parameters()) {  // the opaque forward reaches all
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().norm().item<double>(), 0) << p.key();
  }

  Result<JobSpec> checkpointing = Job("classifier");
  ASSERT_TRUE(checkpointing.ok());
  checkpointing->plan.checkpoint_blocks = {0};
  const Status s = Resolve(&*checkpointing);
  EXPECT_NE(s.message().find("plan.checkpoint_blocks: expected indices below 0"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("has no block protocol"), std::string::npos) << s.message();
}

// Each bad model a clear error that names the job file, the key and the model file.
TEST_F(TorchScriptModelTest, BadModelsAreErrorsNamingTheFileAndTheKey) {
  const auto error_of = [&](Result<JobSpec> spec) -> std::string {
    if (!spec.ok()) return spec.status().message();
    const Status s = Resolve(&*spec);
    return s.ok() ? "accepted" : s.message();
  };
  const std::string missing = error_of(Job("lm", "path: lm.pt", "path: absent.pt"));
  EXPECT_NE(missing.find("lm-job.yaml: model.path: " + dir_.File("absent.pt") + ": no such file"),
            std::string::npos)
      << missing;
  dir_.Write("notes.pt", "not a model\n");
  const std::string not_script = error_of(Job("lm", "path: lm.pt", "path: notes.pt"));
  EXPECT_NE(not_script.find("not a loadable TorchScript module"), std::string::npos) << not_script;
  const std::string no_layers = error_of(Job("lm", "  inputs:", "  blocks: layers\n  inputs:"));
  EXPECT_NE(no_layers.find("lacks a ModuleList attribute 'layers'"), std::string::npos)
      << no_layers;
  const std::string shape = error_of(Job("classifier", "inputs: byte_histogram", "inputs: tokens"));
  EXPECT_NE(shape.find("classifier-job.yaml: model.path: " + dir_.File("classifier.pt") +
                       ": the model fails on a sample of shape [1, 16] int64"),
            std::string::npos)
      << shape;
  const std::string histogram = error_of(Job("lm", "inputs: tokens", "inputs: byte_histogram"));
  EXPECT_NE(histogram.find("fails on a sample of shape [1, 256] float32"), std::string::npos)
      << histogram;
}

TEST_F(TorchScriptModelTest, TrainerRunExitsTwoOnAModelFileThatIsNotTorchScript) {
  dir_.Write("notes.pt", "not a model\n");
  Result<std::string> yaml = ReadText(dir_.File("lm.yaml"));
  ASSERT_TRUE(yaml.ok());
  std::string text = *yaml;
  text.replace(text.find("path: lm.pt"), 11, "path: notes.pt");
  const std::string config = dir_.Write("bad.yaml", text);
  int code = 0;
  const std::string out =
      RunToEnd({TRAINER_RUN_PATH, "--config", config, "--output-dir", dir_.File("out")}, &code);
  EXPECT_EQ(code, exit_code::kUsage) << out;
  EXPECT_NE(out.find("\"kind\":\"model\""), std::string::npos) << out;
  EXPECT_NE(out.find(config + ": model.path: " + dir_.File("notes.pt")), std::string::npos) << out;
}

}  // namespace
}  // namespace trainerd
