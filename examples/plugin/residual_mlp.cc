// A model written in LibTorch C++ and trained by trainerd as a plugin (model_registry.h): a
// residual MLP over feature rows (data.format: tensors) whose residual blocks run through
// RunBlock, so that a plan may checkpoint each of them.
//
//   model:
//     kind: plugin
//     library: build/libresidual_mlp.so
//     name: residual_mlp
//     options: {features: 16, width: 64, blocks: 3, classes: 4}
//
// Built against the installed trainerd package: examples/plugin/CMakeLists.txt.
#include <torch/torch.h>
#include <trainerd/trainer/models/model_registry.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace {

struct ResidualMlpOptions {
  int features = 0;  // the width of a row: model.options.features
  int width = 64;
  int blocks = 2;
  int classes = 0;  // logits [B, classes] for cross_entropy
};

// x + fc2(gelu(fc1(norm(x)))).
class ResidualBlockImpl : public torch::nn::Module {
 public:
  explicit ResidualBlockImpl(int width)
      : norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        fc1_(register_module("fc1", torch::nn::Linear(width, 4 * width))),
        fc2_(register_module("fc2", torch::nn::Linear(4 * width, width))) {}

  torch::Tensor forward(const torch::Tensor& x) { return x + fc2_(torch::gelu(fc1_(norm_(x)))); }

 private:
  torch::nn::LayerNorm norm_;
  torch::nn::Linear fc1_, fc2_;
};
TORCH_MODULE(ResidualBlock);

class ResidualMlp : public trainerd::TrainableModel {
 public:
  explicit ResidualMlp(const ResidualMlpOptions& o)
      : embed_(register_module("embed", torch::nn::Linear(o.features, o.width))),
        blocks_(register_module("blocks", torch::nn::ModuleList())),
        head_(register_module("head", torch::nn::Linear(o.width, o.classes))) {
    for (int i = 0; i < o.blocks; ++i) {
      residual_.push_back(ResidualBlock(o.width));
      blocks_->push_back(residual_.back());
    }
  }

  torch::Tensor forward(const torch::Tensor& rows) override {
    torch::Tensor x = embed_(rows);
    for (int i = 0; i < num_blocks(); ++i) x = RunBlock(i, residual_[i], x);
    return head_(x);
  }
  trainerd::SampleFormat sample_format() const override { return trainerd::SampleFormat::kRows; }
  int num_blocks() const override { return static_cast<int>(residual_.size()); }
  bool has_batch_statistics() const override { return false; }

 private:
  torch::nn::Linear embed_;
  torch::nn::ModuleList blocks_;
  std::vector<ResidualBlock> residual_;
  torch::nn::Linear head_;
};

// model.options.<key>, an integer in [1, 65536]; what is wrong with it otherwise.
int Option(const nlohmann::json& options, const std::string& key, int fallback, bool required) {
  if (!options.contains(key)) {
    if (required) throw std::invalid_argument(key + " is required (an integer, e.g. 16)");
    return fallback;
  }
  const nlohmann::json& value = options.at(key);
  if (!value.is_number_integer() || value.get<long long>() < 1 || value.get<long long>() > 65536) {
    throw std::invalid_argument(key + ": expected an integer in [1, 65536], got " + value.dump());
  }
  return value.get<int>();
}

std::shared_ptr<trainerd::TrainableModel> MakeResidualMlp(const trainerd::ModelContext& context) {
  if (context.inputs != trainerd::ModelInputs::kRows) {
    throw std::invalid_argument("residual_mlp reads rows: use data.format: tensors");
  }
  for (const auto& entry : context.options.items()) {
    const std::string& key = entry.key();
    if (key != "features" && key != "width" && key != "blocks" && key != "classes") {
      throw std::invalid_argument("unknown option " + key +
                                  " (expected features, width, blocks, classes)");
    }
  }
  ResidualMlpOptions o;
  o.features = Option(context.options, "features", 0, /*required=*/true);
  o.width = Option(context.options, "width", o.width, /*required=*/false);
  o.blocks = Option(context.options, "blocks", o.blocks, /*required=*/false);
  o.classes = Option(context.options, "classes", 0, /*required=*/true);
  return std::make_shared<ResidualMlp>(o);
}

}  // namespace

TRAINERD_REGISTER_MODEL("residual_mlp", MakeResidualMlp);
