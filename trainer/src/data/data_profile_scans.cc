#include "data/data_profile_scans.h"

#include <torch/torch.h>

#include <algorithm>

#include "trainerd/trainer/data/array_tensor.h"

namespace trainerd {

void IdHistogram::Add(std::int64_t id) {
  if (id < 0) return;
  largest_ = std::max(largest_, id);
  const auto bin = static_cast<std::size_t>(std::min(id, kMaxCountedIds - 1));
  if (bin >= counts_.size()) counts_.resize(bin + 1);
  ++counts_[bin];
}

nlohmann::json IdHistogram::ToJson() const { return {{"largest", largest_}, {"counts", counts_}}; }

std::optional<IdHistogram> IdHistogram::FromJson(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("largest") || !json["largest"].is_number_integer() ||
      !json.contains("counts") || !json["counts"].is_array()) {
    return std::nullopt;
  }
  IdHistogram histogram;
  histogram.largest_ = json["largest"].get<std::int64_t>();
  for (const nlohmann::json& count : json["counts"]) {
    if (!count.is_number_integer()) return std::nullopt;
    histogram.counts_.push_back(count.get<std::int64_t>());
  }
  return histogram;
}

void IdHistogram::AddInto(const std::vector<std::int64_t>& other,
                          std::vector<std::int64_t>* counts) {
  if (other.size() > counts->size()) counts->resize(other.size());
  for (std::size_t i = 0; i < other.size(); ++i) (*counts)[i] += other[i];
}

namespace {

class TokenIds : public FileScan {
 public:
  explicit TokenIds(int width) : width_(width) {}
  void Chunk(const unsigned char* data, std::size_t size) override {
    // Chunks are whole MiB: an id never straddles two.
    for (std::size_t at = 0; at + static_cast<std::size_t>(width_) <= size; at += width_) {
      std::uint32_t id = 0;
      for (int b = width_ - 1; b >= 0; --b) id = (id << 8) | data[at + b];
      ids_.Add(id);
    }
  }
  nlohmann::json Result() override { return ids_.ToJson(); }

 private:
  int width_;
  IdHistogram ids_;
};

class IntegerArray : public FileScan {
 public:
  IntegerArray(const MappedFile& file, const ArrayView& array) : file_(file), array_(array) {}
  // Elements whose last byte has streamed past are read from the mapping.
  void Chunk(const unsigned char* /*data*/, std::size_t size) override {
    const auto width = static_cast<std::size_t>(ElementBytes(array_.type));
    const std::size_t count = array_.bytes / width;
    const auto finished_by = [&](std::size_t byte) {
      return byte <= array_.offset ? std::size_t{0}
                                   : std::min(count, (byte - array_.offset) / width);
    };
    const std::size_t from = finished_by(streamed_), to = finished_by(streamed_ + size);
    streamed_ += size;
    const unsigned char* elements = file_.data() + array_.offset;
    for (std::size_t i = from; i < to; ++i) ids_.Add(IntegerElement(elements, array_.type, i));
  }
  nlohmann::json Result() override { return ids_.ToJson(); }

 private:
  const MappedFile& file_;
  ArrayView array_;
  std::size_t streamed_ = 0;
  IdHistogram ids_;
};

class FloatRows : public FileScan {
 public:
  FloatRows(const MappedFile& file, const ArrayView& array, bool columns)
      : file_(file), array_(array), columns_(columns) {}
  void Chunk(const unsigned char* /*data*/, std::size_t /*size*/) override {}
  nlohmann::json Result() override {
    const torch::NoGradGuard no_grad;
    const torch::Tensor all = MappedTensor(file_, array_);
    const std::int64_t rows = array_.shape.empty() ? 0 : array_.shape[0];
    nlohmann::json result = {{"rows_not_finite", 0}, {"columns", nlohmann::json::array()}};
    if (rows == 0 || all.numel() == 0) return result;
    const std::int64_t per_row = all.numel() / rows;
    // About 2^22 elements at a time in their own type, whatever a row's width.
    const std::int64_t rows_at_once = std::max<std::int64_t>(1, (std::int64_t{1} << 22) / per_row);
    std::int64_t not_finite = 0;
    torch::Tensor sum, sum_of_squares;
    for (std::int64_t start = 0; start < rows; start += rows_at_once) {
      const std::int64_t n = std::min(rows_at_once, rows - start);
      const torch::Tensor chunk = all.narrow(0, start, n).reshape({n, per_row});
      not_finite += (~torch::isfinite(chunk).all(1)).sum().item<std::int64_t>();
      if (!columns_) continue;
      const torch::Tensor kept =
          chunk.narrow(1, 0, std::min<std::int64_t>(per_row, kMaxProfiledColumns))
              .to(torch::kDouble);
      const torch::Tensor finite =
          torch::where(torch::isfinite(kept), kept, torch::zeros_like(kept));
      sum = sum.defined() ? sum + finite.sum(0) : finite.sum(0);
      sum_of_squares = sum_of_squares.defined() ? sum_of_squares + finite.square().sum(0)
                                                : finite.square().sum(0);
    }
    result["rows_not_finite"] = not_finite;
    if (!sum.defined()) return result;
    const torch::Tensor mean = sum / static_cast<double>(rows);
    const torch::Tensor spread =
        (sum_of_squares / static_cast<double>(rows) - mean.square()).clamp_min(0).sqrt();
    for (std::int64_t c = 0; c < mean.size(0); ++c) {
      result["columns"].push_back(
          {{"mean", mean[c].item<double>()}, {"spread", spread[c].item<double>()}});
    }
    return result;
  }

 private:
  const MappedFile& file_;
  ArrayView array_;
  bool columns_;
};

}  // namespace

std::unique_ptr<FileScan> TokenIdScan(int width) { return std::make_unique<TokenIds>(width); }

std::unique_ptr<FileScan> IntegerArrayScan(const MappedFile& file, const ArrayView& array) {
  return std::make_unique<IntegerArray>(file, array);
}

std::unique_ptr<FileScan> FloatRowsScan(const MappedFile& file, const ArrayView& array,
                                        bool columns) {
  return std::make_unique<FloatRows>(file, array, columns);
}

void ScanSet::Add(const std::string& name, std::unique_ptr<FileScan> scan) {
  scans_.emplace_back(name, std::move(scan));
}

std::string ScanSet::key() const {
  std::string joined;
  for (const auto& [name, scan] : scans_) joined += (joined.empty() ? "" : "; ") + name;
  return joined;
}

void ScanSet::Chunk(const unsigned char* data, std::size_t size) {
  for (const auto& [name, scan] : scans_) scan->Chunk(data, size);
}

nlohmann::json ScanSet::Result() {
  nlohmann::json results = nlohmann::json::object();
  for (const auto& [name, scan] : scans_) results[name] = scan->Result();
  return results;
}

}  // namespace trainerd
