// data.format: tensors: rows written by numpy.save and the reference safetensors package
// (examples/torchscript/write_tensor_data.py), read memory-mapped; the losses a team's
// row model trains with (cross_entropy over [B, C], mse, the module's own); bad files.
#include "data/tensors/tensor_dataset.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "models/gpt/gpt_spec.h"
#include "models/torchscript/torchscript_model.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/spec/exit_codes.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

namespace trainerd {
namespace {

// Runs Debian's Python with the pinned packages (scripts/install-python-packages.sh).
std::string Python(const std::vector<std::string>& args, int* code) {
  std::vector<std::string> argv = {
      "/usr/bin/env", std::string("PYTHONPATH=") + TRAINERD_TEST_PYTHONPATH, TRAINERD_TEST_PYTHON};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunToEnd(argv, code);
}

class TensorDatasetTest : public ::testing::Test {
 protected:
  // The example dataset, model and jobs of `task` (classify or regress) in `dir`.
  static void Write(const testing::TempDir& dir, const std::string& task) {
    int code = 0;
    const std::string out = Python(
        {std::string(TRAINERD_EXAMPLES_DIR) + "/write_tensor_data.py", "--out", dir.path().string(),
         "--task", task, "--rows", "512", "--eval-rows", "64", "--updates", "4"},
        &code);
    ASSERT_EQ(code, 0) << out << "(PYTHONPATH " << TRAINERD_TEST_PYTHONPATH
                       << "; run scripts/install-python-packages.sh)";
  }
  void SetUp() override { Write(dir_, "classify"); }

  JobSpec Job(const std::string& name, const testing::TempDir& dir) const {
    Result<JobSpec> spec = ParseJobSpecFile(dir.File(name));
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    return spec.ok() ? *spec : JobSpec{};
  }
  Result<std::unique_ptr<TensorDataset>> Load(const DataSpec& spec) const {
    return TensorDataset::Load(spec.options.get<TensorDataKeys>(), "");
  }
  // The job resolved against its model file and data, as trainer-run does; the error otherwise.
  Status Resolve(JobSpec* spec) {
    Result<std::unique_ptr<TensorDataset>> data = Load(spec->data);
    if (!data.ok()) return data.status();
    data_ = std::move(*data);
    Status s = ResolveModel(spec, *data_);
    return s.ok() ? CheckModelFitsData(spec->model, spec->source_path, *data_) : s;
  }

  testing::TempDir dir_;
  std::unique_ptr<TensorDataset> data_;
};

TEST_F(TensorDatasetTest, RowsOfNpyAndSafetensorsSplitsAreTheArraysPythonWrote) {
  const JobSpec spec = Job("rows.yaml", dir_);
  Result<std::unique_ptr<TensorDataset>> data = Load(spec.data);
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ((*data)->training_rows(), 512);
  ASSERT_EQ((*data)->slices().size(), 1u);
  EXPECT_EQ((*data)->slices()[0].name, "val");
  EXPECT_EQ((*data)->window(), 1);             // one class per row
  EXPECT_EQ((*data)->vocabulary_needed(), 4);  // four classes
  EXPECT_FALSE((*data)->float_targets());

  // The evaluation split evenly spaced: 64 windows of 64 rows are all of them, in order.
  const Batch val = (*data)->HeldOutSamples(0, 64, SampleFormat::kRows);
  ASSERT_EQ(val.inputs.sizes(), (std::vector<std::int64_t>{64, 16}));
  EXPECT_EQ(val.inputs.scalar_type(), torch::kFloat);
  EXPECT_EQ(val.targets.scalar_type(), torch::kLong);
  int code = 0;
  const std::string out = Python(
      {"-c",
       "import json, sys, safetensors.numpy as s; t = s.load_file(sys.argv[1]); "
       "print(json.dumps({'row': t['inputs'][37].tolist(), 'target': int(t['targets'][37])}))",
       dir_.File("val.safetensors")},
      &code);
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json python = nlohmann::json::parse(out);
  EXPECT_TRUE(torch::equal(val.inputs[37], torch::tensor(python["row"].get<std::vector<float>>())));
  EXPECT_EQ(val.targets[37].item<std::int64_t>(), python["target"].get<std::int64_t>());

  // Sample i of the training stream is a pure function of (seed, i): the split never matters.
  const Batch whole = (*data)->TrainingSamples(5, 0, 8, SampleFormat::kRows);
  const Batch tail = (*data)->TrainingSamples(5, 4, 4, SampleFormat::kRows);
  EXPECT_TRUE(torch::equal(whole.inputs.slice(0, 4), tail.inputs));
  EXPECT_TRUE(torch::equal(whole.targets.slice(0, 4), tail.targets));
  EXPECT_FALSE(
      torch::equal((*data)->TrainingSamples(6, 0, 8, SampleFormat::kRows).inputs, whole.inputs));
}

TEST_F(TensorDatasetTest, TheProfileHasTheClassCountsColumnsAndNanRowsNumpyComputes) {
  const JobSpec spec = Job("rows.yaml", dir_);
  const auto numpy = [&] {
    int code = 0;
    const std::string out = Python(
        {"-c",
         "import json, sys, numpy; d = sys.argv[1]; x = numpy.load(d + '/train/inputs.npy'); "
         "y = numpy.load(d + '/train/targets.npy'); x64 = x.astype(numpy.float64); "
         "print(json.dumps({'classes': numpy.bincount(y).tolist(), "
         "'mean': x64.mean(0).tolist(), 'spread': x64.std(0).tolist()}))",
         dir_.path().string()},
        &code);
    EXPECT_EQ(code, 0) << out;
    return nlohmann::json::parse(out);
  }();
  Result<std::unique_ptr<TensorDataset>> data = Load(spec.data);
  ASSERT_TRUE(data.ok()) << data.status().message();
  const DataProfile& profile = (*data)->profile();
  EXPECT_EQ(profile.train_samples, 512);
  EXPECT_EQ(profile.id_counts, numpy["classes"].get<std::vector<std::int64_t>>());
  EXPECT_EQ(profile.rows_not_finite, 0);
  ASSERT_EQ(profile.columns.size(), 16u);
  for (std::size_t c = 0; c < 16; ++c) {
    EXPECT_NEAR(profile.columns[c].mean, numpy["mean"][c].get<double>(), 1e-9) << c;
    EXPECT_NEAR(profile.columns[c].spread, numpy["spread"][c].get<double>(), 1e-9) << c;
  }
  // Three rows of a new export hold NaN or an infinity.
  int code = 0;
  const std::string out =
      Python({"-c",
              "import numpy, sys; f = sys.argv[1] + '/train/inputs.npy'; x = numpy.load(f); "
              "x[0, 3] = numpy.nan; x[5, :] = numpy.inf; x[9, 15] = -numpy.inf; numpy.save(f, x)",
              dir_.path().string()},
             &code);
  ASSERT_EQ(code, 0) << out;
  Result<std::unique_ptr<TensorDataset>> broken = Load(spec.data);
  ASSERT_TRUE(broken.ok()) << broken.status().message();
  EXPECT_EQ((*broken)->profile().rows_not_finite, 3);
}

// Each bad file an error naming it and what is wrong; nothing is read past a bad header.
TEST_F(TensorDatasetTest, BadArrayFilesAreErrorsNamingTheFile) {
  const JobSpec spec = Job("rows.yaml", dir_);
  const auto error_of = [&](const DataSpec& data) {
    Result<std::unique_ptr<TensorDataset>> loaded = Load(data);
    return loaded.ok() ? std::string("accepted") : loaded.status().message();
  };
  const std::string inputs = dir_.File("train/inputs.npy");
  const auto size = std::filesystem::file_size(inputs);
  std::filesystem::resize_file(inputs, size - 100);
  const std::string truncated = error_of(spec.data);
  EXPECT_NE(truncated.find("data file " + inputs + ": truncated: the header's shape (512, 16)"),
            std::string::npos)
      << truncated;

  // The worker: exit 3, an error event of kind data naming the file; nothing written.
  testing::ChildProcess worker(
      {TRAINER_RUN_PATH, "--config", dir_.File("rows.yaml"), "--output-dir", dir_.File("out")});
  std::string events;
  for (const std::string& line : worker.ReadAllLines()) events += line + "\n";
  EXPECT_EQ(worker.ExitCode(), exit_code::kBadData) << events;
  EXPECT_NE(events.find("\"kind\":\"data\""), std::string::npos) << events;
  EXPECT_NE(events.find(inputs + ": truncated"), std::string::npos) << events;
  EXPECT_FALSE(std::filesystem::exists(dir_.File("out/model.pt")));

  std::filesystem::create_directories(dir_.path() / "wide");
  int code = 0;
  const std::string out =
      Python({"-c",
              "import numpy, sys; d = sys.argv[1]; "
              "numpy.save(d + '/train/inputs.npy', numpy.zeros((512, 16), dtype=numpy.uint16)); "
              "numpy.save(d + '/wide/inputs.npy', numpy.asfortranarray(numpy.zeros((512, 16), "
              "dtype=numpy.float32)))",
              dir_.path().string()},
             &code);
  ASSERT_EQ(code, 0) << out;
  const std::string unsigned16 = error_of(spec.data);
  EXPECT_NE(unsigned16.find(inputs + ": element type '<u2' is not one of"), std::string::npos)
      << unsigned16;
  DataSpec fortran = spec.data;
  fortran.options["train"] = dir_.File("wide");
  std::filesystem::copy_file(dir_.File("train/targets.npy"), dir_.File("wide/targets.npy"));
  EXPECT_NE(error_of(fortran).find("Fortran-ordered array"), std::string::npos)
      << error_of(fortran);

  DataSpec renamed = spec.data;
  renamed.options["train"] = dir_.File("val.safetensors");
  renamed.options["targets"] = "labels";
  EXPECT_NE(error_of(renamed).find(dir_.File("val.safetensors") +
                                   ": no tensor 'labels' (data.targets); it holds inputs, targets"),
            std::string::npos)
      << error_of(renamed);

  DataSpec missing = renamed;
  missing.options["targets"] = "targets";
  missing.options["eval"] = {dir_.File("test")};
  EXPECT_NE(error_of(missing).find(dir_.File("test") + ": expected a .safetensors file or a "
                                                       "directory holding inputs.npy and "
                                                       "targets.npy"),
            std::string::npos)
      << error_of(missing);
}

// The module's own loss (here cross-entropy again) trains the same model as loss:
// cross_entropy, although its term count is known only after each forward.
TEST_F(TensorDatasetTest, AModulesOwnLossTrainsTheSameJobAsTheBuiltInOne) {
  std::vector<double> losses;
  for (const char* name : {"rows.yaml", "rows-module-loss.yaml"}) {
    JobSpec spec = Job(name, dir_);
    ASSERT_TRUE(Resolve(&spec).ok()) << Resolve(&spec).message();
    spec.plan = {8, 4, {}, Precision::kFp32};
    NullEventSink sink;
    Trainer trainer(spec, *data_, &sink);
    TrainerOptions options;
    options.checkpoint_path = dir_.File(std::string(name) + ".checkpoint");
    options.model_path = dir_.File(std::string(name) + ".pt");
    Result<TrainOutcome> outcome = trainer.Run(options);
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    ASSERT_EQ(outcome->kind, TrainOutcome::Kind::kFinished) << outcome->message;
    losses.push_back(outcome->final_train_loss);
    losses.push_back(outcome->eval.at(0).loss);
  }
  EXPECT_NEAR(losses[0], losses[2], 1e-6);
  EXPECT_NEAR(losses[1], losses[3], 1e-6);
}

// FLOPs per sample of a module the job gives none for: 3 x its forward's matrix products,
// here three Linear layers 16 -> 64 -> 64 -> 4 (2 x in x out each).
TEST_F(TensorDatasetTest, TheFlopsOfAModuleAreCountedOverItsMatrixProducts) {
  JobSpec spec = Job("rows.yaml", dir_);
  ASSERT_TRUE(Resolve(&spec).ok());
  ASSERT_TRUE(spec.model.loaded->counted_flops_per_sample.has_value())
      << spec.model.loaded->flops_unknown_reason;
  EXPECT_DOUBLE_EQ(*spec.model.loaded->counted_flops_per_sample,
                   3 * 2.0 * (16 * 64 + 64 * 64 + 64 * 4));
}

// Parity with accumulation holds for every loss, and catches the per-microbatch division bug
// for the module's loss too (whose divisor is applied after the last backward).
TEST_F(TensorDatasetTest, AccumulationPassesParityAndTheClassicBugFailsItForEachLoss) {
  testing::TempDir regression;
  Write(regression, "regress");
  for (const auto& [dir, name] :
       {std::pair{&dir_, "rows.yaml"}, std::pair{&dir_, "rows-module-loss.yaml"},
        std::pair{&regression, "rows.yaml"}, std::pair{&regression, "rows-module-loss.yaml"}}) {
    JobSpec spec = Job(name, *dir);
    ASSERT_TRUE(Resolve(&spec).ok()) << Resolve(&spec).message();
    spec.plan = {8, 4, {}, Precision::kFp32};
    Result<ParityReport> report = CheckParity(spec, *data_, 2);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_TRUE(report->pass) << name << " " << ToJson(*report).dump();
    Result<ParityReport> broken = CheckParity(spec, *data_, 2, TrainingFault::kLossPerMicrobatch);
    ASSERT_TRUE(broken.ok());
    EXPECT_FALSE(broken->pass) << name << " " << ToJson(*broken).dump();
  }
}

// What the model gives must be what the loss compares with the targets, checked before
// anything trains: an error naming the job, the key and both shapes.
TEST_F(TensorDatasetTest, OutputsThatDoNotMatchTheTargetsAreRefusedBeforeTraining) {
  testing::TempDir regression;
  Write(regression, "regress");
  // The regression model (outputs [B, 1]) on the classes (targets [B]) with mse.
  JobSpec spec = Job("rows.yaml", regression);
  spec.data = Job("rows.yaml", dir_).data;
  spec.model.loss.kind = LossKind::kMse;
  const Status mse = Resolve(&spec);
  EXPECT_NE(mse.message().find("model.loss: mse needs outputs shaped like the targets [1], got "
                               "[1, 1]"),
            std::string::npos)
      << mse.message();
  // cross_entropy on one logit per row of four classes: too few classes.
  spec.model.loss.kind = LossKind::kCrossEntropy;
  const Status classes = Resolve(&spec);
  EXPECT_NE(classes.message().find("model.path: the data's class targets go up to 3: expected "
                                   "logits [B, C] with C at least 4, got 1"),
            std::string::npos)
      << classes.message();
  // The built-in GPT cannot read rows.
  JobSpec gpt = Job("rows.yaml", dir_);
  gpt.model = GptModelSpec({});
  const Status built_in = CheckModelFitsData(gpt.model, gpt.source_path, **Load(gpt.data));
  EXPECT_NE(built_in.message().find("data.format: tensors needs model.kind: plugin or torchscript"),
            std::string::npos)
      << built_in.message();
}

}  // namespace
}  // namespace trainerd
