// Fixture for tests that train the tiny job: its spec, its corpus, one intra-op thread.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>

#include "data/text/text_corpus.h"
#include "tiny_job_spec.h"

namespace trainerd::testing {

class TinyJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<TextCorpus> corpus =
        TextCorpus::Load(spec_.data.options.get<TextDataKeys>(), spec_.model.block_size);
    ASSERT_TRUE(corpus.ok()) << corpus.status().message();
    corpus_ = std::make_unique<TextCorpus>(std::move(corpus).value());
    torch::set_num_threads(1);
  }

  JobSpec spec_ = TinyGptJob();
  std::unique_ptr<TextCorpus> corpus_;
};

}  // namespace trainerd::testing
