#include "data/text/text_corpus.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"

namespace trainerd {
namespace {

TextDataKeys Files(std::vector<std::string> files) {
  TextDataKeys keys;
  keys.files = std::move(files);
  return keys;
}

TextDataKeys TinyJobFiles() { return testing::TinyGptJob().data.options.get<TextDataKeys>(); }

TEST(TextCorpusTest, LoadsRealTextWithOneSlicePerFile) {
  Result<TextCorpus> corpus = TextCorpus::Load(TinyJobFiles(), 32);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  ASSERT_EQ(corpus->slices().size(), 2u);
  EXPECT_EQ(corpus->slices()[0].name, "GPL-3");
  EXPECT_EQ(corpus->fingerprint().size(), 64u);
}

TEST(TextCorpusTest, SymlinksToTheSameFileCountOnce) {
  // GPL is a symlink to GPL-3 on Debian.
  Result<TextCorpus> corpus = TextCorpus::Load(Files({std::string(testing::kLicenceDir) + "/GPL-3",
                                                      std::string(testing::kLicenceDir) + "/GPL"}),
                                               32);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  EXPECT_EQ(corpus->slices().size(), 1u);
}

TEST(TextCorpusTest, BatchesAreAPureFunctionOfSeedAndSampleIndex) {
  Result<TextCorpus> corpus = TextCorpus::Load(TinyJobFiles(), 32);
  ASSERT_TRUE(corpus.ok());
  const Batch a = corpus->TrainingSamples(7, 0, 8, SampleFormat::kNextToken);
  const Batch b = corpus->TrainingSamples(7, 0, 8, SampleFormat::kNextToken);
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  // Samples 4..7 drawn on their own are the tail of the batch of 8: microbatch splits and
  // resumes see the same data.
  const Batch tail = corpus->TrainingSamples(7, 4, 4, SampleFormat::kNextToken);
  EXPECT_TRUE(torch::equal(tail.inputs, a.inputs.narrow(0, 4, 4)));
  const Batch other_seed = corpus->TrainingSamples(8, 0, 8, SampleFormat::kNextToken);
  EXPECT_FALSE(torch::equal(other_seed.inputs, a.inputs));
  // Targets are the inputs shifted by one token.
  EXPECT_TRUE(torch::equal(a.targets.narrow(1, 0, 31), a.inputs.narrow(1, 1, 31)));
}

TEST(TextCorpusTest, TrainingWindowsNeverReachTheHeldOutPart) {
  testing::TempDir dir;
  // 'a' for the training part, 'z' for the held-out tail: a leak would show a 'z'.
  const std::string path = dir.Write("ab.txt", std::string(900, 'a') + std::string(100, 'z'));
  Result<TextCorpus> corpus = TextCorpus::Load(Files({path}), 16);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  const Batch batch = corpus->TrainingSamples(1, 0, 2000, SampleFormat::kNextToken);
  EXPECT_EQ(batch.inputs.eq('z').sum().item<int64_t>(), 0);
  EXPECT_EQ(batch.targets.eq('z').sum().item<int64_t>(), 0);
}

TEST(TextCorpusTest, HeldOutSlicesCoverTheHeldOutSplit) {
  testing::TempDir dir;
  const std::string one = dir.Write("one.txt", std::string(900, 'a') + std::string(100, 'b'));
  const std::string two = dir.Write("two.txt", std::string(1800, 'c') + std::string(200, 'd'));
  Result<TextCorpus> corpus = TextCorpus::Load(Files({one, two}), 16);
  ASSERT_TRUE(corpus.ok()) << corpus.status().message();
  ASSERT_EQ(corpus->slices().size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const char held_out = i == 0 ? 'b' : 'd';
    const DataSlice& slice = corpus->slices()[i];
    const int windows = static_cast<int>(slice.holdout_bytes);  // dense enough to touch every byte
    const Batch batch = corpus->HeldOutSamples(i, windows, SampleFormat::kNextToken);
    EXPECT_TRUE(batch.inputs.eq(held_out).all().item<bool>()) << slice.name;
    // The first held-out byte is an input and the last one a target of some window.
    EXPECT_TRUE(batch.targets.select(0, windows - 1).select(0, 15).eq(held_out).item<bool>());
  }
}

TEST(TextCorpusTest, FingerprintChangesWhenAFileChanges) {
  testing::TempDir dir;
  const std::string path = dir.Write("t.txt", std::string(500, 'x'));
  const std::string before = TextCorpus::Load(Files({path}), 16)->fingerprint();
  EXPECT_EQ(TextCorpus::Load(Files({path}), 16)->fingerprint(), before);
  dir.Write("t.txt", std::string(499, 'x') + "y");
  EXPECT_NE(TextCorpus::Load(Files({path}), 16)->fingerprint(), before);
}

TEST(TextCorpusTest, BadDataGivesErrorsNamingTheFile) {
  testing::TempDir dir;
  struct Case {
    std::string path;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {dir.File("missing.txt"), "missing.txt"},
      {dir.Write("empty.txt", ""), "empty.txt: is empty"},
      {dir.Write("short.txt", std::string(100, 'q')), "short.txt: too short for block_size 64"},
      {dir.path().string(), "not a regular file"},
  };
  for (const Case& c : cases) {
    Result<TextCorpus> corpus = TextCorpus::Load(Files({c.path}), 64);
    ASSERT_FALSE(corpus.ok()) << c.path;
    EXPECT_NE(corpus.status().message().find(c.expected), std::string::npos)
        << corpus.status().message();
  }
}

TEST(TextCorpusTest, ClassifierSamplesAreByteHistogramsLabelledBySlice) {
  Result<TextCorpus> corpus = TextCorpus::Load(TinyJobFiles(), 32);
  ASSERT_TRUE(corpus.ok());
  const Batch batch = corpus->TrainingSamples(3, 0, 16, SampleFormat::kSliceOfWindow);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{16, 256}));
  EXPECT_TRUE(torch::allclose(batch.inputs.sum(1), torch::ones({16})));
  EXPECT_TRUE(batch.targets.ge(0).logical_and(batch.targets.lt(2)).all().item<bool>());
}

}  // namespace
}  // namespace trainerd
