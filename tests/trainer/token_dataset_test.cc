// data.format: tokens: flat uint16/uint32 token-id files, memory-mapped, with the digest of a
// large file cached by (path, size, mtime).
#include "data/tokens/token_dataset.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/spec/exit_codes.h"

namespace trainerd {
namespace {

constexpr int kWindow = 16;

// Writes ids `first + i` (mod `modulo`) for i < count as little-endian `bytes`-wide ids.
std::string WriteIds(const testing::TempDir& dir, const std::string& name, std::int64_t count,
                     int bytes, std::int64_t first = 0, std::int64_t modulo = 1000) {
  std::string data;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto id = static_cast<std::uint32_t>((first + i) % modulo);
    for (int b = 0; b < bytes; ++b) data.push_back(static_cast<char>((id >> (8 * b)) & 0xff));
  }
  return dir.Write(name, data);
}

class TokenDatasetTest : public ::testing::Test {
 protected:
  DataSpec Spec(int bytes = 2) const {
    return TokenDataSpec({dir_.File("train.bin"), {dir_.File("val.bin")}, bytes});
  }
  void WriteBoth(int bytes = 2, std::int64_t modulo = 1000) {
    WriteIds(dir_, "train.bin", 5000, bytes, 0, modulo);
    WriteIds(dir_, "val.bin", 800, bytes, 7, modulo);
  }
  std::unique_ptr<Dataset> Load(const DataSpec& spec, const std::string& cache = "") {
    Result<std::unique_ptr<Dataset>> d = LoadDataset(spec, kWindow, cache);
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? std::move(*d) : nullptr;
  }
  std::string Error(const DataSpec& spec) {
    Result<std::unique_ptr<Dataset>> d = LoadDataset(spec, kWindow, "");
    return d.ok() ? "loaded" : d.status().message();
  }
  testing::TempDir dir_;
};

TEST_F(TokenDatasetTest, AWindowIsConsecutiveIdsAndItsNextTokensAndSampleIAPureFunction) {
  WriteBoth();
  std::unique_ptr<Dataset> data = Load(Spec());
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->vocabulary_needed(), 1000);
  ASSERT_EQ(data->slices().size(), 1u);
  EXPECT_EQ(data->slices()[0].name, "val");
  EXPECT_FALSE(data->supports(SampleFormat::kSliceOfWindow));
  const Batch batch = data->TrainingSamples(11, 0, 6, SampleFormat::kNextToken);
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{6, kWindow}));
  for (std::int64_t b = 0; b < 6; ++b) {
    const std::int64_t start = batch.inputs[b][0].item<std::int64_t>();
    for (int t = 0; t < kWindow; ++t) {
      EXPECT_EQ(batch.inputs[b][t].item<std::int64_t>(), (start + t) % 1000);
      EXPECT_EQ(batch.targets[b][t].item<std::int64_t>(), (start + t + 1) % 1000);
    }
  }
  // Sample 4 is the same window whether drawn in a batch of six or alone.
  const Batch alone = data->TrainingSamples(11, 4, 1, SampleFormat::kNextToken);
  EXPECT_TRUE(torch::equal(alone.inputs[0], batch.inputs[4]));
  EXPECT_FALSE(
      torch::equal(data->TrainingSamples(12, 4, 1, SampleFormat::kNextToken).inputs, alone.inputs));
  const Batch held_out = data->HeldOutSamples(0, 3, SampleFormat::kNextToken);
  EXPECT_EQ(held_out.inputs[0][0].item<std::int64_t>(), 7);  // val.bin starts at id 7
  EXPECT_EQ(held_out.targets[2][kWindow - 1].item<std::int64_t>(), (7 + 799) % 1000);  // its end
}

TEST_F(TokenDatasetTest, Uint32IdsBeyondSixteenBitsAreRead) {
  WriteBoth(4, 70000);
  WriteIds(dir_, "train.bin", 5000, 4, 66000, 70000);
  std::unique_ptr<Dataset> data = Load(Spec(4));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->vocabulary_needed(), 70000);
  const Batch batch = data->TrainingSamples(3, 0, 64, SampleFormat::kNextToken);
  EXPECT_GT(batch.inputs.max().item<std::int64_t>(), 65535);
}

TEST_F(TokenDatasetTest, BadFilesAreErrorsNamingTheFile) {
  WriteBoth();
  DataSpec missing = Spec();
  missing.options["eval"] = {dir_.File("absent.bin")};
  EXPECT_NE(Error(missing).find("data file " + dir_.File("absent.bin")), std::string::npos);
  dir_.Write("odd.bin", std::string(2001, 'x'));
  DataSpec truncated = Spec();
  truncated.options["train"] = dir_.File("odd.bin");
  EXPECT_NE(Error(truncated).find(dir_.File("odd.bin") +
                                  ": 2001 bytes is not a whole number of uint16 token ids"),
            std::string::npos)
      << Error(truncated);
  WriteIds(dir_, "short.bin", kWindow, 2);
  DataSpec short_file = Spec();
  short_file.options["eval"] = {dir_.File("short.bin")};
  EXPECT_NE(Error(short_file).find("16 token ids, fewer than one window of block_size + 1 = 17"),
            std::string::npos)
      << Error(short_file);
}

TEST_F(TokenDatasetTest, TheDigestOfAFileIsCachedBySizeAndMtimeAndRecomputedWhenEitherChanges) {
  WriteBoth();
  const std::string cache = dir_.File("cache/digests.json");
  const std::string fingerprint = Load(Spec(), cache)->fingerprint();
  ASSERT_TRUE(std::filesystem::exists(cache));
  auto* again = dynamic_cast<TokenDataset*>(Load(Spec(), cache).release());
  ASSERT_NE(again, nullptr);
  std::unique_ptr<TokenDataset> owned(again);
  EXPECT_EQ(owned->digests_from_cache(), 2);
  EXPECT_EQ(owned->fingerprint(), fingerprint);

  // The cache is what answers: an entry altered by hand changes the fingerprint...
  nlohmann::json entries = nlohmann::json::parse(std::ifstream(cache));
  entries[dir_.File("val.bin")]["sha256"] = std::string(64, '0');
  std::ofstream(cache) << entries.dump();
  EXPECT_NE(Load(Spec(), cache)->fingerprint(), fingerprint);
  // ...until the file's mtime changes: then it is streamed again and the entry corrected.
  std::filesystem::last_write_time(
      dir_.File("val.bin"),
      std::filesystem::last_write_time(dir_.File("val.bin")) + std::chrono::seconds(5));
  std::unique_ptr<Dataset> refreshed = Load(Spec(), cache);
  EXPECT_EQ(refreshed->fingerprint(), fingerprint);
  EXPECT_EQ(dynamic_cast<TokenDataset&>(*refreshed).digests_from_cache(), 1);
}

TEST_F(TokenDatasetTest, TheProfileCountsTheTrainingIdsAndComesFromTheCacheWithTheDigest) {
  WriteBoth();  // train: ids 0..999, 5 times each; val: other ids, not profiled
  const std::string cache = dir_.File("cache/digests.json");
  const DataProfile streamed = Load(Spec(), cache)->profile();
  EXPECT_EQ(streamed.train_samples, 5000);
  EXPECT_EQ(streamed.id_counts, std::vector<std::int64_t>(1000, 5));
  EXPECT_EQ(streamed.rows_not_finite, 0);
  std::unique_ptr<Dataset> cached = Load(Spec(), cache);
  EXPECT_EQ(dynamic_cast<TokenDataset&>(*cached).digests_from_cache(), 2);
  EXPECT_EQ(cached->profile().id_counts, streamed.id_counts);
  // A scan's cached result edited into something else is not believed: the file is read again.
  nlohmann::json entries = nlohmann::json::parse(std::ifstream(cache));
  for (auto& [key, scan] : entries[dir_.File("train.bin")]["scans"].items()) scan["counts"] = "x";
  std::ofstream(cache) << entries.dump();
  std::unique_ptr<Dataset> reread = Load(Spec(), cache);
  EXPECT_EQ(reread->profile().id_counts, streamed.id_counts);
  EXPECT_EQ(dynamic_cast<TokenDataset&>(*reread).digests_from_cache(), 1);
}

TEST_F(TokenDatasetTest, TheSameFilesReadAsWiderIdsAreScannedAgainNotAnsweredFromTheCache) {
  WriteBoth();  // uint16 ids 0..999
  const std::string cache = dir_.File("cache/digests.json");
  const std::int64_t narrow = Load(Spec(2), cache)->vocabulary_needed();
  EXPECT_EQ(narrow, 1000);
  // Pairs of uint16 ids read as uint32 ids are far larger; the cached uint16 answer is not
  // theirs (it was returned for them before the scan became part of the cache key).
  const std::int64_t wide_fresh = Load(Spec(4))->vocabulary_needed();
  ASSERT_GT(wide_fresh, narrow);
  std::unique_ptr<Dataset> wide = Load(Spec(4), cache);
  EXPECT_EQ(wide->vocabulary_needed(), wide_fresh);
  EXPECT_EQ(dynamic_cast<TokenDataset&>(*wide).digests_from_cache(), 0);
  // Both scans are kept: each answered from the cache from now on.
  std::unique_ptr<Dataset> narrow_again = Load(Spec(2), cache);
  EXPECT_EQ(narrow_again->vocabulary_needed(), narrow);
  EXPECT_EQ(dynamic_cast<TokenDataset&>(*narrow_again).digests_from_cache(), 2);
  EXPECT_EQ(dynamic_cast<TokenDataset&>(*Load(Spec(4), cache)).digests_from_cache(), 2);
}

TEST_F(TokenDatasetTest, AModelMustCoverTheDatasTokenIdsAndHistogramsNeedText) {
  WriteBoth();
  std::unique_ptr<Dataset> data = Load(Spec());
  ModelSpec gpt = testing::TinyGptJob().model;
  const Status small = CheckModelFitsData(gpt, "job.yaml", *data);
  EXPECT_EQ(small.message(),
            "job.yaml: model.vocab_size: the data's token ids go up to 999: expected at least "
            "1000, got 256");
  gpt.options["vocab_size"] = 1000;
  EXPECT_TRUE(CheckModelFitsData(gpt, "job.yaml", *data).ok());
  const ModelSpec mlp = MlpModelSpec({});
  EXPECT_NE(CheckModelFitsData(mlp, "job.yaml", *data).message().find("use data.format: text"),
            std::string::npos);
}

TEST_F(TokenDatasetTest, AGptTrainsOnTokenDataAndAnAccumulatedCheckpointedPlanPassesParity) {
  WriteBoth();
  JobSpec spec = testing::TinyGptJob();
  spec.data = Spec();
  spec.model.block_size = kWindow;
  spec.model.options["vocab_size"] = 1000;
  spec.plan = {4, 2, {1}, Precision::kFp32};
  std::unique_ptr<Dataset> data = Load(spec.data);
  {
    NullEventSink sink;
    Trainer trainer(spec, *data, &sink);
    EXPECT_NEAR(trainer.TrainUpdate(0).loss, std::log(1000.0), 0.5);  // untrained, 1000 ids
  }
  Result<ParityReport> parity = CheckParity(spec, *data, 2);
  ASSERT_TRUE(parity.ok()) << parity.status().message();
  EXPECT_TRUE(parity->pass) << ToJson(*parity).dump();
}

TEST_F(TokenDatasetTest, TrainerRunExitsThreeWhenTheVocabularyDoesNotCoverTheData) {
  WriteBoth();
  const std::string config = dir_.Write(
      "job.yaml",
      "model: {kind: gpt, n_layer: 1, n_head: 2, n_embd: 16, block_size: 16, vocab_size: 999}\n"
      "data: {format: tokens, train: train.bin, eval: [val.bin]}\n"
      "training: {effective_batch: 4, updates: 2}\nruntime: {threads: 1}\n");
  testing::ChildProcess child(
      {TRAINER_RUN_PATH, "--config", config, "--output-dir", dir_.File("out")});
  child.ReadAllLines();
  const std::string err = child.ReadAllStderr();
  EXPECT_EQ(child.ExitCode(), exit_code::kBadData) << err;
  EXPECT_NE(err.find(config + ": model.vocab_size: the data's token ids go up to 999: expected "
                              "at least 1000, got 999"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace trainerd
