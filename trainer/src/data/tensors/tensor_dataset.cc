#include "data/tensors/tensor_dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "data/data_profile_scans.h"
#include "trainerd/common/sha256.h"
#include "trainerd/trainer/data/array_tensor.h"

namespace trainerd {
namespace {

std::vector<std::int64_t> RowShape(const ArrayView& array) {
  return {array.shape.begin() + 1, array.shape.end()};
}

// The rows `rows` of `array` in `file` as a float32 (floating-point elements) or int64
// tensor [rows, ...]: only the picked rows' pages are read.
torch::Tensor Rows(const MappedFile& file, const ArrayView& array,
                   const std::vector<std::int64_t>& rows) {
  const torch::Tensor all = MappedTensor(file, array);
  const torch::Tensor picked = all.index_select(0, torch::tensor(rows, torch::kLong));
  return picked.to(IsFloatingPoint(array.type) ? torch::kFloat : torch::kLong);
}

// "int64 tensor 'targets' at bytes 128+4096": what a scan of `array` reads, its cache key.
std::string Describe(const std::string& name, const ArrayView& array) {
  return std::string(ToString(array.type)) + " tensor '" + name + "' at bytes " +
         std::to_string(array.offset) + "+" + std::to_string(array.bytes);
}

}  // namespace

Result<TensorDataset::Split> TensorDataset::OpenSplit(const TensorDataKeys& keys,
                                                      const std::string& path) {
  Split split;
  const std::filesystem::path p(path);
  split.name = p.stem().string();
  std::error_code ec;
  if (p.extension() == ".safetensors") {
    Result<MappedFile> file = MappedFile::Open(path, /*access_random=*/true);
    if (!file.ok()) return file.status();
    Result<std::map<std::string, ArrayView>> arrays =
        ReadSafetensorsHeader(file->data(), file->size(), path);
    if (!arrays.ok()) return arrays.status();
    for (const auto& [key, name, out] :
         {std::tuple{"data.inputs", keys.inputs, &split.inputs},
          std::tuple{"data.targets", keys.targets, &split.targets}}) {
      const auto found = arrays->find(name);
      if (found == arrays->end()) {
        std::string have;
        for (const auto& entry : *arrays) have += (have.empty() ? "" : ", ") + entry.first;
        return Status::InvalidArgument("data file " + path + ": no tensor '" + name + "' (" + key +
                                       "); it holds " + (have.empty() ? "none" : have));
      }
      *out = found->second;
    }
    split.files.push_back(std::move(*file));
  } else if (std::filesystem::is_directory(p, ec)) {
    for (const auto& [name, out, index] :
         {std::tuple{keys.inputs, &split.inputs, &split.inputs_file},
          std::tuple{keys.targets, &split.targets, &split.targets_file}}) {
      const std::string npy = (p / (name + ".npy")).string();
      Result<MappedFile> file = MappedFile::Open(npy, /*access_random=*/true);
      if (!file.ok()) return file.status();
      Result<ArrayView> array = ReadNpyHeader(file->data(), file->size(), npy);
      if (!array.ok()) return array.status();
      *out = *array;
      *index = split.files.size();
      split.files.push_back(std::move(*file));
    }
  } else {
    return Status::NotFound("data file " + path +
                            ": expected a .safetensors file or a directory holding " + keys.inputs +
                            ".npy and " + keys.targets + ".npy");
  }
  const auto& inputs = split.inputs;
  const auto& targets = split.targets;
  if (inputs.shape.empty() || targets.shape.empty() || inputs.shape[0] != targets.shape[0]) {
    return Status::InvalidArgument("data file " + path + ": inputs " + ShapeText(inputs.shape) +
                                   " and targets " + ShapeText(targets.shape) +
                                   " must have one row per sample (the same first dimension)");
  }
  split.rows = inputs.shape[0];
  if (split.rows == 0) return Status::InvalidArgument("data file " + path + ": no rows");
  return split;
}

Result<std::unique_ptr<TensorDataset>> TensorDataset::Load(const TensorDataKeys& keys,
                                                           const std::string& digest_cache) {
  std::unique_ptr<TensorDataset> d(new TensorDataset());
  Sha256 hasher;
  hasher.Update("tensors " + keys.inputs + " " + keys.targets);
  const auto add = [&](const std::string& role, const std::string& path) -> Result<Split> {
    Result<Split> split = OpenSplit(keys, path);
    if (!split.ok()) return split;
    const ArrayView& inputs = split->inputs;
    const ArrayView& targets = split->targets;
    for (std::size_t f = 0; f < split->files.size(); ++f) {
      const MappedFile& file = split->files[f];
      // Integer targets give the classes (and the training split's counts of them); the
      // training split's floating-point rows give the profile's NaN rows and columns.
      const auto scans = [&] {
        auto set = std::make_unique<ScanSet>();
        const bool holds_targets = f == split->targets_file;
        const std::string targets_name = Describe(keys.targets, targets);
        if (holds_targets && !IsFloatingPoint(targets.type)) {
          set->Add(targets_name, IntegerArrayScan(file, targets));
        }
        if (role != "train") return set;
        if (f == split->inputs_file && IsFloatingPoint(inputs.type)) {
          set->Add(Describe(keys.inputs, inputs) + " rows", FloatRowsScan(file, inputs, true));
        }
        if (holds_targets && IsFloatingPoint(targets.type)) {
          set->Add(targets_name + " rows", FloatRowsScan(file, targets, false));
        }
        return set;
      };
      std::unique_ptr<ScanSet> set = scans();
      Result<FileDigest> digest =
          DigestFile(file.path(), set->key(), set->empty() ? nullptr : set.get(), digest_cache);
      if (!digest.ok()) return digest.status();
      if (Status s = d->AddScanned(role, digest->scanned); !s.ok()) {
        set = scans();  // a cache edited by hand: the pass again, without it
        digest = DigestFile(file.path(), set->key(), set->empty() ? nullptr : set.get(), "");
        if (!digest.ok()) return digest.status();
        if (Status again = d->AddScanned(role, digest->scanned); !again.ok()) return again;
      }
      hasher.Update("\n" + role + " " + split->name + " " +
                    std::filesystem::path(file.path()).filename().string() + " " + digest->sha256);
    }
    return split;
  };
  Result<Split> train = add("train", keys.train);
  if (!train.ok()) return train.status();
  d->train_ = std::move(*train);
  d->profile_.train_samples = d->train_.rows;
  const auto kind = [](const ArrayView& a) {
    return IsFloatingPoint(a.type) ? "float" : "integer";
  };
  for (const std::string& path : keys.eval) {
    Result<Split> eval = add("eval", path);
    if (!eval.ok()) return eval.status();
    for (const auto& [what, mine, theirs] :
         {std::tuple{"inputs", &eval->inputs, &d->train_.inputs},
          std::tuple{"targets", &eval->targets, &d->train_.targets}}) {
      if (RowShape(*mine) != RowShape(*theirs) ||
          std::string(kind(*mine)) != std::string(kind(*theirs))) {
        return Status::InvalidArgument("data file " + path + ": " + what + " rows are " +
                                       kind(*mine) + " " + ShapeText(RowShape(*mine)) +
                                       ", the training split's (" + keys.train + ") " +
                                       kind(*theirs) + " " + ShapeText(RowShape(*theirs)));
      }
    }
    std::size_t bytes = 0;
    for (const MappedFile& file : eval->files) bytes += file.size();
    d->slices_.push_back({eval->name, path, 0, static_cast<std::int64_t>(bytes)});
    d->eval_.push_back(std::move(*eval));
  }
  std::int64_t per_row = 1;
  for (const std::int64_t dim : RowShape(d->train_.targets)) per_row *= dim;
  d->window_ = static_cast<int>(std::max<std::int64_t>(1, per_row));
  d->fingerprint_ = hasher.HexDigest();
  return d;
}

Status TensorDataset::AddScanned(const std::string& role, const nlohmann::json& scanned) {
  if (scanned.is_null()) return Status::Ok();
  const Status broken = Status::Corruption("a scan's cached result is not its own");
  if (!scanned.is_object()) return broken;
  // Into copies, kept only when every result reads.
  DataProfile profile = profile_;
  std::int64_t largest = largest_target_;
  for (const auto& [name, result] : scanned.items()) {
    if (name.size() > 5 && name.compare(name.size() - 5, 5, " rows") == 0) {
      if (role != "train") continue;
      std::vector<std::string> mistyped;
      const DataProfile rows = Parse<DataProfile>(result, &mistyped);
      if (!mistyped.empty() || !result.contains("rows_not_finite")) return broken;
      profile.rows_not_finite += rows.rows_not_finite;
      if (!rows.columns.empty()) profile.columns = rows.columns;
      continue;
    }
    const std::optional<IdHistogram> ids = IdHistogram::FromJson(result);
    if (!ids) return broken;
    largest = std::max(largest, ids->largest());
    if (role == "train") IdHistogram::AddInto(ids->counts(), &profile.id_counts);
  }
  profile_ = std::move(profile);
  largest_target_ = largest;
  return Status::Ok();
}

Batch TensorDataset::Assemble(const Split& split, const std::vector<std::int64_t>& rows) const {
  Batch batch;
  batch.samples = static_cast<std::int64_t>(rows.size());
  batch.inputs = Rows(split.files[split.inputs_file], split.inputs, rows);
  batch.targets = Rows(split.files[split.targets_file], split.targets, rows);
  return batch;
}

Batch TensorDataset::TrainingSamples(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                     SampleFormat format) const {
  TORCH_CHECK(supports(format), "tensor data gives rows only");
  Batch batch = Assemble(train_, StreamPicks(seed, first, count, train_.rows));
  batch.stream = SampleStream{seed, first};
  return batch;
}

Batch TensorDataset::HeldOutSamples(std::size_t index, int windows, SampleFormat format) const {
  TORCH_CHECK(supports(format), "tensor data gives rows only");
  const Split& split = eval_.at(index);
  const std::int64_t n = std::min<std::int64_t>(windows, split.rows);
  std::vector<std::int64_t> picked;
  for (std::int64_t k = 0; k < n; ++k)
    picked.push_back(n == 1 ? 0 : (split.rows - 1) * k / (n - 1));
  return Assemble(split, picked);
}

namespace {

Result<std::unique_ptr<Dataset>> LoadTensors(const DataSpec& spec, int /*window*/,
                                             const std::string& digest_cache) {
  Result<std::unique_ptr<TensorDataset>> rows =
      TensorDataset::Load(spec.options.get<TensorDataKeys>(), digest_cache);
  if (!rows.ok()) return rows.status();
  return std::unique_ptr<Dataset>(std::move(*rows));
}

TRAINERD_REGISTER_DATASET("tensors", LoadTensors);

}  // namespace
}  // namespace trainerd
