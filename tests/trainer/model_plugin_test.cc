// A model written in LibTorch C++ as a plugin (model_plugin.h): the example a team starts from
// (examples/plugin), built against the installed trainerd package by the build_test_plugins
// fixture, trained by the real trainer-run on data written by real Python.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "trainerd/common/array_file.h"
#include "trainerd/trainer/spec/exit_codes.h"

namespace trainerd {
namespace {

using testing::RunToEnd;

const std::string kExample = std::string(TRAINERD_TEST_PLUGINS) + "/example/libresidual_mlp.so";
const std::string kStale = std::string(TRAINERD_TEST_PLUGINS) + "/libstale_abi_plugin.so";

// The residual MLP over the 16-feature, 4-class rows of write_tensor_data.py.
constexpr char kModel[] = R"(model:
  kind: plugin
  library: LIBRARY
  name: residual_mlp
  options: {features: 16, width: 32, blocks: 3, classes: 4}
)";
constexpr char kRest[] = R"(data:
  format: tensors
  train: train
  eval: [val.safetensors]
training: {effective_batch: 32, updates: 40, eval_interval: 40, seed: 7}
plan: {microbatch: 8, checkpoint_blocks: all}
memory: {budget: 2GiB}
runtime: {threads: 2}
)";

std::vector<nlohmann::json> EventsOf(const std::string& out) {
  std::vector<nlohmann::json> events;
  std::size_t start = 0;
  while (start < out.size()) {
    const std::size_t end = out.find('\n', start);
    const std::string line = out.substr(start, end - start);
    if (!line.empty() && line[0] == '{') events.push_back(nlohmann::json::parse(line));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return events;
}

nlohmann::json EventNamed(const std::vector<nlohmann::json>& events, const std::string& name) {
  for (const nlohmann::json& e : events) {
    if (e.value("event", "") == name) return e;
  }
  return {};
}

class ModelPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kExample)) << kExample << " (fixture build_test_plugins)";
    int code = 0;
    const std::string out = RunToEnd(
        {"/usr/bin/env", std::string("PYTHONPATH=") + TRAINERD_TEST_PYTHONPATH,
         TRAINERD_TEST_PYTHON, std::string(TRAINERD_EXAMPLES_DIR) + "/write_tensor_data.py",
         "--out", dir_.path().string(), "--rows", "512", "--eval-rows", "64"},
        &code);
    ASSERT_EQ(code, 0) << out;
  }

  using Edits = std::vector<std::pair<std::string, std::string>>;
  // The job, each edit's first text replaced in its model section.
  std::string Job(const Edits& edits = {}) const {
    std::string model = kModel;
    model.replace(model.find("LIBRARY"), 7, kExample);
    for (const auto& [from, to] : edits) model.replace(model.find(from), from.size(), to);
    return dir_.Write("plugin.yaml", model + kRest);
  }
  std::string Run(const std::vector<std::string>& args, int* code) const {
    std::vector<std::string> argv = {TRAINER_RUN_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunToEnd(argv, code);
  }

  testing::TempDir dir_;
};

TEST_F(ModelPluginTest, TheExamplePluginTrainsWithItsBlocksCheckpointedAndReleasesItsWeights) {
  int code = 0;
  const std::string out = Run({"--config", Job(), "--output-dir", dir_.File("out")}, &code);
  ASSERT_EQ(code, exit_code::kOk) << out;
  const std::vector<nlohmann::json> events = EventsOf(out);
  const nlohmann::json start = EventNamed(events, "start");
  EXPECT_EQ(start["model"]["kind"], "plugin");
  EXPECT_EQ(start["model"]["blocks"], 3);
  // checkpoint_blocks: all, expanded once the library told how many blocks there are.
  EXPECT_EQ(start["plan"]["checkpoint_blocks"], nlohmann::json::parse("[0, 1, 2]"));
  EXPECT_EQ(start["plan"]["accumulation_steps"], 4);
  const nlohmann::json finish = EventNamed(events, "finish");
  EXPECT_EQ(finish["updates_trained"], 40);
  // Chance on four classes is ln 4 = 1.386: the model learnt the projections.
  EXPECT_LT(finish["eval_mean_loss"].get<double>(), 1.2) << finish.dump();
  EXPECT_GT(finish["model_flops_per_sample"].get<double>(), 0);

  const nlohmann::json about =
      nlohmann::json::parse(testing::ReadFile(dir_.File("out/model.json")));
  EXPECT_EQ(about["model"]["kind"], "plugin");
  EXPECT_EQ(about["model"]["name"], "residual_mlp");
  EXPECT_EQ(about["model"]["options"]["width"], 32);
  EXPECT_EQ(about["model"]["sha256"].get<std::string>().size(), 64u);
  // The weights by the names of the plugin's modules, shaped as it built them.
  const std::string weights = testing::ReadFile(dir_.File("out/model.safetensors"));
  Result<std::map<std::string, ArrayView>> header = ReadSafetensorsHeader(
      reinterpret_cast<const unsigned char*>(weights.data()), weights.size(), "model.safetensors");
  ASSERT_TRUE(header.ok()) << header.status().message();
  ASSERT_TRUE(header->count("blocks.2.fc1.weight"));
  EXPECT_EQ(header->at("blocks.2.fc1.weight").shape, (std::vector<std::int64_t>{128, 32}));
  EXPECT_EQ(header->at("head.weight").shape, (std::vector<std::int64_t>{4, 32}));
}

TEST_F(ModelPluginTest, APlanThatCheckpointsThePluginsBlocksAndAccumulatesPassesParity) {
  int code = 0;
  const std::string out =
      Run({"--config", Job(), "--parity", "--parity-updates", "3", "--json"}, &code);
  ASSERT_EQ(code, exit_code::kOk) << out;
  const nlohmann::json verdict = EventsOf(out).back();
  EXPECT_TRUE(verdict["pass"].get<bool>()) << verdict.dump();
  EXPECT_EQ(verdict["checked_plan"]["checkpoint_blocks"], nlohmann::json::parse("[0, 1, 2]"));
  EXPECT_EQ(verdict["checked_plan"]["accumulation_steps"], 4);
}

// Each bad plugin a clear error naming the job file, the key and the value, before training.
TEST_F(ModelPluginTest, BadPluginsAreErrorsNamingTheJobFileTheKeyAndTheLibrary) {
  const std::string notes = dir_.Write("notes.so", "not a library\n");
  const std::string missing = dir_.File("missing.so");
  struct Case {
    Edits edits;
    int exit_code;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {{{kExample, missing}}, exit_code::kUsage, {"model.library: " + missing + ": no such file"}},
      {{{kExample, notes}},
       exit_code::kUsage,
       {"model.library: " + notes + ": not a loadable plugin library"}},
      {{{"name: residual_mlp", "name: resnet"}},
       exit_code::kUsage,
       {"model.name: resnet: " + kExample + " registers 'residual_mlp'"}},
      // A library built against other trainerd headers is refused, not called.
      {{{kExample, kStale}, {"name: residual_mlp", "name: stale_model"}},
       exit_code::kUsage,
       {"model.library: " + kStale + ": built against LibTorch ", " and plugin ABI ",
        ", but this worker runs LibTorch ", ": rebuild it against this trainerd"}},
      {{{"features: 16, ", ""}},
       exit_code::kUsage,
       {"model.options: {\"blocks\":3,\"classes\":4,\"width\":32}: the plugin cannot build its "
        "model: features is required"}},
      {{{"blocks: 3", "depth: 3"}}, exit_code::kUsage, {"model.options: ", "unknown option depth"}},
      {{{"features: 16", "features: 8"}},
       exit_code::kUsage,
       {"model.library: " + kExample + ": the model fails on a sample of shape [1, 16] float32"}},
      {{{"classes: 4", "classes: 2"}},
       exit_code::kBadData,
       {"model.library: the data's class targets go up to 3: expected logits [B, C] with C at "
        "least 4, got 2"}},
  };
  for (const Case& c : cases) {
    const std::string config = Job(c.edits);
    const std::string what = c.edits.back().second;
    int code = 0;
    const std::string out = Run({"--config", config, "--output-dir", dir_.File("out")}, &code);
    EXPECT_EQ(code, c.exit_code) << what << "\n" << out;
    for (const std::string& part : c.expected) {
      EXPECT_NE(out.find(config + ": "), std::string::npos) << what << "\n" << out;
      EXPECT_NE(out.find(part), std::string::npos) << what << ": " << part << "\n" << out;
    }
    EXPECT_FALSE(std::filesystem::exists(dir_.File("out/model.pt"))) << what;
  }
}

}  // namespace
}  // namespace trainerd
