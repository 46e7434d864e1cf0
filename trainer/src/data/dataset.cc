#include "trainerd/trainer/data/dataset.h"

#include <map>

#include "trainerd/common/mix.h"

namespace trainerd {

std::int64_t StreamPick(std::uint64_t seed, std::int64_t i, std::int64_t starts) {
  return static_cast<std::int64_t>(Mix(Mix(seed) ^ static_cast<std::uint64_t>(i)) %
                                   static_cast<std::uint64_t>(starts));
}

std::vector<std::int64_t> StreamPicks(std::uint64_t seed, std::int64_t first, std::int64_t count,
                                      std::int64_t starts) {
  std::vector<std::int64_t> picks;
  picks.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = first; i < first + count; ++i) picks.push_back(StreamPick(seed, i, starts));
  return picks;
}

std::vector<std::int64_t> EvenlySpaced(std::int64_t n, std::int64_t last) {
  std::vector<std::int64_t> positions;
  for (std::int64_t k = 0; k < n; ++k) positions.push_back(n == 1 ? 0 : last * k / (n - 1));
  return positions;
}

Batch RowsOf(const Batch& batch, std::int64_t start, std::int64_t count, torch::Device device) {
  Batch rows;
  rows.inputs = batch.inputs.narrow(0, start, count).to(device);
  rows.targets = batch.targets.narrow(0, start, count).to(device);
  rows.samples = count;
  if (batch.stream)
    rows.stream = SampleStream{batch.stream->seed, batch.stream->first_sample + start};
  if (batch.positions.defined()) rows.positions = batch.positions.narrow(0, start, count);
  return rows;
}

namespace {

std::map<std::string, DatasetLoader>& Loaders() {
  static std::map<std::string, DatasetLoader> loaders;
  return loaders;
}

}  // namespace

bool RegisterDatasetLoader(const std::string& format, DatasetLoader loader) {
  return Loaders().emplace(format, std::move(loader)).second;
}

Result<std::unique_ptr<Dataset>> LoadDataset(const DataSpec& spec, int window,
                                             const std::string& digest_cache) {
  const auto loader = Loaders().find(spec.format);
  if (loader == Loaders().end()) {
    return Status::InvalidArgument("data.format: " + spec.format + ": no such data format");
  }
  return loader->second(spec, window, digest_cache);
}

}  // namespace trainerd
