// Packed documents (data.document_end, semantics/document_positions.h): token data as
// documents, packed several to a window with positions that restart and attention within each,
// or one to a window, padded; and a model that reads them gives each document of a packed
// window the logits it gives alone.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "../support/cuda_test.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_spec.h"
#include "data/tokens/tokens_spec.h"
#include "models/gpt/gpt.h"
#include "trainerd/trainer/data/dataset.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/semantics/document_positions.h"
#include "trainerd/trainer/spec/data_format.h"

namespace trainerd {
namespace {

constexpr int kWindow = 16;
constexpr std::int64_t kEnd = 999;

std::string Uint16s(const std::vector<std::int64_t>& ids) {
  std::string bytes;
  for (const std::int64_t id : ids) {
    bytes.push_back(static_cast<char>(id & 0xff));
    bytes.push_back(static_cast<char>((id >> 8) & 0xff));
  }
  return bytes;
}

// Documents A (5 ids), B (40) and C (17), each ending with kEnd: A at 0, B at 5, C at 45.
std::vector<std::int64_t> ThreeDocuments() {
  std::vector<std::int64_t> ids = {11, 12, 13, 14, kEnd};
  for (int i = 0; i < 39; ++i) ids.push_back(100 + i);
  ids.push_back(kEnd);
  for (int i = 0; i < 16; ++i) ids.push_back(200 + i);
  ids.push_back(kEnd);
  return ids;
}

// 300 documents of 1 to 23 ids, and in their middle a run of 200 ends (empty documents): the
// 184 windows inside it learn nothing, 5 % of the windows, which 500 draws would not miss.
std::vector<std::int64_t> ManyDocuments() {
  std::vector<std::int64_t> ids;
  for (int k = 0; k < 300; ++k) {
    for (int j = 0; j < (k * 7) % 23; ++j) ids.push_back((k * 31 + j) % 998 + 1);
    ids.push_back(kEnd);
    if (k == 150) ids.insert(ids.end(), 200, kEnd);
  }
  return ids;
}

class DocumentsTest : public ::testing::Test {
 protected:
  DataSpec Spec(bool packing) const {
    TokenDataKeys keys{dir_.File("train.bin"), {dir_.File("val.bin")}, 2};
    keys.document_end = kEnd;
    keys.packing = packing;
    return TokenDataSpec(keys);
  }
  void Write(const std::vector<std::int64_t>& train, const std::vector<std::int64_t>& val) {
    dir_.Write("train.bin", Uint16s(train));
    dir_.Write("val.bin", Uint16s(val));
  }
  std::unique_ptr<Dataset> Load(const DataSpec& spec) {
    Result<std::unique_ptr<Dataset>> d = LoadDataset(spec, kWindow, "");
    EXPECT_TRUE(d.ok()) << d.status().message();
    return d.ok() ? std::move(*d) : nullptr;
  }
  testing::TempDir dir_;
};

// Window b of a packed batch: positions count up from 0 and restart after each end id; the
// target after an end id (a document's first) is not learned, every other is the next input;
// and the window learns something.
void ExpectPacked(const Batch& batch) {
  ASSERT_TRUE(batch.positions.defined());
  ASSERT_EQ(batch.positions.sizes(), batch.inputs.sizes());
  for (std::int64_t b = 0; b < batch.samples; ++b) {
    const auto in = batch.inputs[b], out = batch.targets[b], at = batch.positions[b];
    EXPECT_EQ(at[0].item<std::int64_t>(), 0);
    int learned = 0;
    for (int t = 0; t < kWindow; ++t) {
      const bool ends = in[t].item<std::int64_t>() == kEnd;
      if (t > 0) {
        const std::int64_t before = at[t - 1].item<std::int64_t>();
        EXPECT_EQ(at[t].item<std::int64_t>(),
                  in[t - 1].item<std::int64_t>() == kEnd ? 0 : before + 1)
            << "window " << b << " position " << t;
      }
      const std::int64_t target = out[t].item<std::int64_t>();
      if (ends) {
        EXPECT_EQ(target, kMaskedTarget) << "window " << b << " learns a document's first id";
      } else if (t + 1 < kWindow) {
        EXPECT_EQ(target, in[t + 1].item<std::int64_t>());
      }
      learned += target != kMaskedTarget ? 1 : 0;
    }
    EXPECT_GT(learned, 0) << "window " << b << " learns nothing";
  }
}

TEST_F(DocumentsTest, APackedWindowRestartsItsPositionsAtEachDocumentAndLearnsNoFirstId) {
  Write(ManyDocuments(), ThreeDocuments());
  std::unique_ptr<Dataset> data = Load(Spec(/*packing=*/true));
  ASSERT_NE(data, nullptr);
  ExpectPacked(data->TrainingSamples(3, 0, 500, SampleFormat::kNextToken));
  // Held out: the first and last of val.bin's 46 windows, A and B's first 11 ids, then C.
  const Batch held_out = data->HeldOutSamples(0, 2, SampleFormat::kNextToken);
  ExpectPacked(held_out);
  const std::vector<std::int64_t> ids = ThreeDocuments();
  const torch::Tensor all = torch::tensor(ids);
  EXPECT_TRUE(torch::equal(held_out.inputs[0], all.narrow(0, 0, kWindow)));
  EXPECT_TRUE(torch::equal(held_out.positions[0],
                           torch::cat({torch::arange(5), torch::arange(11)}).to(torch::kLong)));
  EXPECT_TRUE(torch::equal(held_out.inputs[1], all.narrow(0, 45, kWindow)));
  EXPECT_TRUE(torch::equal(held_out.positions[1], torch::arange(kWindow).to(torch::kLong)));
  EXPECT_TRUE(torch::equal(held_out.targets[1], all.narrow(0, 46, kWindow)));
  const std::optional<DocumentProfile>& profile = data->profile().documents;
  ASSERT_TRUE(profile.has_value());
  EXPECT_EQ(profile->count, 500);  // 300 and the run's 200
  EXPECT_EQ(profile->longest, 23);
  EXPECT_EQ(profile->padding_share, 0.0);
}

TEST_F(DocumentsTest, UnpackedEachWindowIsOneDocumentPaddedAndALongerOneInPieces) {
  Write(ThreeDocuments(), ThreeDocuments());
  std::unique_ptr<Dataset> data = Load(Spec(/*packing=*/false));
  ASSERT_NE(data, nullptr);
  // A; B from 5, 21 and 37 (each piece's first id the last target of the one before); C.
  const std::vector<std::pair<std::int64_t, std::int64_t>> pieces = {
      {0, 5}, {5, 17}, {21, 17}, {37, 8}, {45, 17}};
  const Batch held_out = data->HeldOutSamples(0, 5, SampleFormat::kNextToken);
  EXPECT_FALSE(held_out.positions.defined()) << "one document per window: positions 0..T-1";
  const torch::Tensor all = torch::tensor(ThreeDocuments());
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const auto [start, length] = pieces[k];
    const auto i = static_cast<std::int64_t>(k);
    torch::Tensor inputs = torch::full({kWindow}, kEnd, torch::kLong);
    torch::Tensor targets = torch::full({kWindow}, kMaskedTarget, torch::kLong);
    inputs.narrow(0, 0, length - 1).copy_(all.narrow(0, start, length - 1));
    targets.narrow(0, 0, length - 1).copy_(all.narrow(0, start + 1, length - 1));
    EXPECT_TRUE(torch::equal(held_out.inputs[i], inputs)) << "piece " << k;
    EXPECT_TRUE(torch::equal(held_out.targets[i], targets)) << "piece " << k;
  }
  // Training draws those pieces alone.
  const Batch drawn = data->TrainingSamples(3, 0, 200, SampleFormat::kNextToken);
  for (std::int64_t b = 0; b < drawn.samples; ++b) {
    const std::int64_t first = drawn.inputs[b][0].item<std::int64_t>();
    EXPECT_TRUE(first == 11 || first == 100 || first == 116 || first == 132 || first == 200)
        << first;
  }
  const std::optional<DocumentProfile>& profile = data->profile().documents;
  ASSERT_TRUE(profile.has_value());
  EXPECT_EQ(profile->count, 3);
  EXPECT_EQ(profile->median_length, 17);
  EXPECT_EQ(profile->longest, 40);
  EXPECT_DOUBLE_EQ(profile->padding_share, 21.0 / 80.0);  // 59 inputs in 5 windows of 16
}

TEST_F(DocumentsTest, AnEndIdThatNeverOccursIsAnErrorAndDocumentsChangeTheFingerprint) {
  Write(ThreeDocuments(), ThreeDocuments());
  DataSpec wrong = Spec(true);
  wrong.options["document_end"] = 7;
  Result<std::unique_ptr<Dataset>> refused = LoadDataset(wrong, kWindow, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "data.document_end: 7 never occurs in " + dir_.File("train.bin") +
                ": the id that ends each document (the tokenizer's EOS)");
  DataSpec stream = Spec(true);
  stream.options["document_end"] = -1;
  const std::string fingerprints[] = {Load(stream)->fingerprint(), Load(Spec(true))->fingerprint(),
                                      Load(Spec(false))->fingerprint()};
  EXPECT_NE(fingerprints[0], fingerprints[1]);
  EXPECT_NE(fingerprints[1], fingerprints[2]);
}

// A GPT of `kernels` on `device` with positions learned: documents of 5, 7 and 4 ids in one
// window, of 3 and 13 in the other. Each document's logits in the packed window equal its
// logits alone within `tolerance`, and differ without the positions.
void ExpectEachDocumentGivesItsLogitsAlone(GptKernels kernels, torch::Device device,
                                           double tolerance) {
  torch::manual_seed(5);
  GptOptions options;
  options.n_layer = 2;
  options.n_head = 2;
  options.n_embd = 32;
  options.block_size = kWindow;
  options.vocab_size = 1000;
  options.kernels = kernels;
  Gpt model(options);
  model.to(device);
  model.eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 998, {2, kWindow}, torch::kLong).to(device);
  const std::vector<std::vector<std::int64_t>> lengths = {{5, 7, 4}, {3, 13}};
  std::vector<torch::Tensor> rows;
  for (const std::vector<std::int64_t>& row : lengths) {
    std::vector<torch::Tensor> restarts;
    for (const std::int64_t length : row) restarts.push_back(torch::arange(length));
    rows.push_back(torch::cat(restarts).to(torch::kLong));
  }
  torch::Tensor packed;
  {
    const DocumentPositionsScope documents(torch::stack(rows));  // on the CPU, as batches are
    packed = model.forward(tokens).cpu();
  }
  const torch::Tensor unaware = model.forward(tokens).cpu();
  for (std::int64_t b = 0; b < 2; ++b) {
    std::int64_t start = 0;
    for (const std::int64_t length : lengths[static_cast<std::size_t>(b)]) {
      const torch::Tensor alone =
          model.forward(tokens[b].narrow(0, start, length).unsqueeze(0)).cpu()[0];
      EXPECT_LE((packed[b].narrow(0, start, length) - alone).abs().max().item<double>(), tolerance)
          << "row " << b << ": the document at " << start;
      if (start > 0) {
        EXPECT_GT((unaware[b].narrow(0, start, length) - alone).abs().max().item<double>(), 1e-3)
            << "row " << b << ": without its positions the document at " << start
            << " sees the one before";
      }
      start += length;
    }
  }
}

class PackedGptTest : public ::testing::TestWithParam<GptKernels> {};

TEST_P(PackedGptTest, EachDocumentOfAPackedWindowGivesTheLogitsItGivesAlone) {
  ExpectEachDocumentGivesItsLogitsAlone(GetParam(), torch::kCPU, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Kernels, PackedGptTest,
                         ::testing::Values(GptKernels::kFused, GptKernels::kExplicit));

// On a GPU (scripts/device-check.sh): the mask through scaled_dot_product_attention (or the
// explicit attention) keeps the documents apart there too; 1e-4, as the packed window's
// masked attention and a document's causal one may take different kernels.
class PackedGptCudaTest : public testing::CudaTest {};

TEST_F(PackedGptCudaTest, EachDocumentOfAPackedWindowGivesTheLogitsItGivesAloneOnTheGpu) {
  ExpectEachDocumentGivesItsLogitsAlone(GptKernels::kFused, cuda_, 1e-4);
}

// The parity check's reference runs the whole effective batch at once, without checkpointing:
// a plan that accumulates over checkpointed blocks computes the same update only if each
// block's recompute keeps the documents apart as its forward did.
TEST_F(DocumentsTest, AnAccumulatedCheckpointedPlanOverPackedDocumentsPassesParity) {
  Write(ManyDocuments(), ManyDocuments());
  JobSpec spec = testing::TinyGptJob();
  spec.data = Spec(/*packing=*/true);
  spec.model.block_size = kWindow;
  spec.model.options["vocab_size"] = 1000;
  spec.plan = {2, 4, {0, 1}, Precision::kFp32};
  std::unique_ptr<Dataset> data = Load(spec.data);
  ASSERT_NE(data, nullptr);
  Result<ParityReport> parity = CheckParity(spec, *data, 2);
  ASSERT_TRUE(parity.ok()) << parity.status().message();
  EXPECT_TRUE(parity->pass) << ToJson(*parity).dump();
}

}  // namespace
}  // namespace trainerd
