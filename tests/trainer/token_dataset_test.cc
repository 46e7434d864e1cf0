// data.format: tokens: flat uint16/uint32 token-id files, memory-mapped, with the digest of a
// large file cached by (path, size, mtime).
#include "data/tokens/token_dataset.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "models/mlp/mlp_spec.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/resolve_model.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/spec/data_format.h"
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

// Writes a loss mask of `count` bytes: 1 where `learned(i)`.
std::string WriteMask(const testing::TempDir& dir, const std::string& name, std::int64_t count,
                      const std::function<bool(std::int64_t)>& learned) {
  std::string mask;
  for (std::int64_t i = 0; i < count; ++i) mask.push_back(learned(i) ? 1 : 0);
  return dir.Write(name, mask);
}

class TokenDatasetTest : public ::testing::Test {
 protected:
  DataSpec Spec(int bytes = 2) const {
    return TokenDataSpec({dir_.File("train.bin"), {dir_.File("val.bin")}, bytes});
  }
  DataSpec MaskedSpec() const {
    return TokenDataSpec({dir_.File("train.bin"), {dir_.File("val.bin")}, 2, true});
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

// Each target of `batch` (windows of a file whose id i is first_id + i) is its next id where
// `learned`, kMaskedTarget where not; and each window learns at least one. Returns the
// windows' starts.
std::vector<std::int64_t> CheckMasked(const Batch& batch, std::int64_t first_id,
                                      const std::function<bool(std::int64_t)>& learned) {
  std::vector<std::int64_t> starts;
  for (std::int64_t b = 0; b < batch.samples; ++b) {
    const std::int64_t start = batch.inputs[b][0].item<std::int64_t>() - first_id;
    starts.push_back(start);
    int learned_here = 0;
    for (int t = 0; t < kWindow; ++t) {
      const std::int64_t target = batch.targets[b][t].item<std::int64_t>();
      EXPECT_EQ(batch.inputs[b][t].item<std::int64_t>(), first_id + start + t);
      if (learned(start + t + 1)) {
        EXPECT_EQ(target, first_id + start + t + 1);
        ++learned_here;
      } else {
        EXPECT_EQ(target, kMaskedTarget) << "id " << start + t + 1 << " of the window at " << start;
      }
    }
    EXPECT_GT(learned_here, 0) << "the window at " << start << " learns nothing";
  }
  return starts;
}

// Learned: ids [1000, 1100) and [3000, 3010) of train.bin, [400, 404) of val.bin. A window
// learns when a target is learned: it starts in [984, 1098] or [2984, 3008] (140 windows).
TEST_F(TokenDatasetTest, ALossMaskLeavesItsTargetsOutAndOnlyWindowsThatLearnAreDrawn) {
  WriteIds(dir_, "train.bin", 5000, 2, 0, 65000);
  WriteIds(dir_, "val.bin", 800, 2, 7, 65000);
  const auto train_learned = [](std::int64_t i) {
    return (i >= 1000 && i < 1100) || (i >= 3000 && i < 3010);
  };
  const auto val_learned = [](std::int64_t i) { return i >= 400 && i < 404; };
  WriteMask(dir_, "train.mask", 5000, train_learned);
  WriteMask(dir_, "val.mask", 800, val_learned);
  std::unique_ptr<Dataset> data = Load(MaskedSpec());
  ASSERT_NE(data, nullptr);
  const Batch drawn = data->TrainingSamples(5, 0, 600, SampleFormat::kNextToken);
  const std::vector<std::int64_t> picked = CheckMasked(drawn, 0, train_learned);
  const std::set<std::int64_t> starts(picked.begin(), picked.end());
  EXPECT_EQ(*starts.begin(), 984);
  EXPECT_EQ(*starts.rbegin(), 3008);
  EXPECT_GT(starts.size(), 120u) << "600 draws among 140 windows";
  for (const std::int64_t start : starts) EXPECT_TRUE(start <= 1098 || start >= 2984) << start;
  // Sample i is still a pure function of (seed, i).
  EXPECT_TRUE(torch::equal(data->TrainingSamples(5, 37, 1, SampleFormat::kNextToken).targets[0],
                           drawn.targets[37]));
  // Held out: evenly spaced among val.bin's 19 windows that learn, [384, 402].
  EXPECT_EQ(CheckMasked(data->HeldOutSamples(0, 3, SampleFormat::kNextToken), 7, val_learned),
            (std::vector<std::int64_t>{384, 393, 402}));
  EXPECT_EQ(data->profile().learned_targets, 110);
}

TEST_F(TokenDatasetTest, AMaskIsPartOfTheFingerprintAndWithoutMasksNothingChanges) {
  WriteBoth();
  const std::string plain = Load(Spec())->fingerprint();
  EXPECT_FALSE(Load(Spec())->profile().learned_targets.has_value());
  const auto odd = [](std::int64_t i) { return i % 2 == 1; };
  WriteMask(dir_, "train.mask", 5000, odd);
  WriteMask(dir_, "val.mask", 800, odd);
  EXPECT_EQ(Load(Spec())->fingerprint(), plain) << "masks beside the files, not asked for";
  const std::string masked = Load(MaskedSpec())->fingerprint();
  EXPECT_NE(masked, plain);
  WriteMask(dir_, "val.mask", 800, [](std::int64_t i) { return i % 3 == 1; });
  EXPECT_NE(Load(MaskedSpec())->fingerprint(), masked);
}

TEST_F(TokenDatasetTest, BadMasksAreErrorsNamingTheFile) {
  WriteBoth();
  WriteMask(dir_, "train.mask", 5000, [](std::int64_t i) { return i % 2 == 1; });
  EXPECT_NE(Error(MaskedSpec()).find("data.loss_masks: data file " + dir_.File("val.mask")),
            std::string::npos)
      << Error(MaskedSpec());
  WriteMask(dir_, "val.mask", 799, [](std::int64_t) { return true; });
  EXPECT_NE(Error(MaskedSpec())
                .find(dir_.File("val.mask") + ": 799 bytes, but " + dir_.File("val.bin") +
                      " holds 800 ids"),
            std::string::npos)
      << Error(MaskedSpec());
  WriteMask(dir_, "val.mask", 800, [](std::int64_t i) { return i == 0; });
  EXPECT_NE(Error(MaskedSpec()).find(dir_.File("val.mask") + ": no id after the first is marked 1"),
            std::string::npos)
      << Error(MaskedSpec());
  std::string two(800, 1);
  two[123] = 2;
  dir_.Write("val.mask", two);
  EXPECT_NE(Error(MaskedSpec()).find(dir_.File("val.mask") + ": byte 123 is 2"), std::string::npos)
      << Error(MaskedSpec());
  // An evaluation slice may learn every target; the training file may not: that is the
  // silent fallback of a chat whose prompts were not found. The first id is no target.
  WriteMask(dir_, "val.mask", 800, [](std::int64_t) { return true; });
  EXPECT_EQ(Error(MaskedSpec()), "loaded");
  WriteMask(dir_, "train.mask", 5000, [](std::int64_t i) { return i > 0; });
  EXPECT_NE(Error(MaskedSpec())
                .find(dir_.File("train.mask") + ": every id is marked 1, the same as no mask"),
            std::string::npos)
      << Error(MaskedSpec());
}

// Windows learn unequal numbers of targets, so the effective batch's mean is not the mean of
// the microbatches' means: an accumulated plan equals the one-batch reference only when every
// microbatch's sum is divided by the count of the whole batch.
TEST_F(TokenDatasetTest, AnAccumulatedPlanOverUnevenMasksPassesParityAndPerMicrobatchMeansFail) {
  WriteBoth();
  // Learned densities from 1 % to 24 %, changing every 64 ids.
  const auto uneven = [](std::int64_t i) { return (i * 7919) % 97 < (i / 64) % 23 + 1; };
  WriteMask(dir_, "train.mask", 5000, uneven);
  WriteMask(dir_, "val.mask", 800, uneven);
  JobSpec spec = testing::TinyGptJob();
  spec.data = MaskedSpec();
  spec.model.block_size = kWindow;
  spec.model.options["vocab_size"] = 1000;
  spec.plan = {2, 4, {1}, Precision::kFp32};
  std::unique_ptr<Dataset> data = Load(spec.data);
  ASSERT_NE(data, nullptr);
  const Batch batch = data->TrainingSamples(spec.training.seed, 0, 8, SampleFormat::kNextToken);
  const torch::Tensor per_window = batch.targets.ne(kMaskedTarget).sum(1);
  EXPECT_GT(per_window.max().item<std::int64_t>(), per_window.min().item<std::int64_t>())
      << "the masks must be uneven across the windows of an update";
  Result<ParityReport> parity = CheckParity(spec, *data, 2);
  ASSERT_TRUE(parity.ok()) << parity.status().message();
  EXPECT_TRUE(parity->pass) << ToJson(*parity).dump();
  Result<ParityReport> broken = CheckParity(spec, *data, 2, TrainingFault::kLossPerMicrobatch);
  ASSERT_TRUE(broken.ok()) << broken.status().message();
  EXPECT_FALSE(broken->pass) << ToJson(*broken).dump();
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
  // uint16 ids 0, 1, 0, 1, ...: read as uint32 each pair is 65536, a histogram of 64k counts
  // (ids up to 999 would make it 65M counts, written to the cache and read back: a minute).
  WriteBoth(2, /*modulo=*/2);
  const std::string cache = dir_.File("cache/digests.json");
  const std::int64_t narrow = Load(Spec(2), cache)->vocabulary_needed();
  EXPECT_EQ(narrow, 2);
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
