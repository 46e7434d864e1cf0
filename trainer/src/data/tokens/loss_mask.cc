#include "data/tokens/loss_mask.h"

#include <algorithm>

namespace trainerd {

Result<LossMask> LossMask::Load(const std::string& path, const std::string& ids_path,
                                std::int64_t ids, int window) {
  Result<MappedFile> file = MappedFile::Open(path, /*access_random=*/true);
  if (!file.ok()) {
    if (file.status().code() != Status::Code::kNotFound) return file.status();
    return Status::NotFound("data.loss_masks: " + file.status().message() +
                            " (each id file has its mask beside it: one byte per id, 1 learned, "
                            "0 not)");
  }
  if (static_cast<std::int64_t>(file->size()) != ids) {
    return Status::InvalidArgument(
        "data.loss_masks: " + path + ": " + std::to_string(file->size()) + " bytes, but " +
        ids_path + " holds " + std::to_string(ids) + " ids: a mask has one byte per id");
  }
  LossMask mask;
  mask.file_ = std::move(*file);
  const unsigned char* bytes = mask.file_.data();
  const std::int64_t last_start = ids - window - 1;
  std::int64_t run_last = -1;  // the last start of the current run
  for (std::int64_t p = 0; p < ids; ++p) {
    if (bytes[p] > 1) {
      return Status::InvalidArgument("data.loss_masks: " + path + ": byte " + std::to_string(p) +
                                     " is " + std::to_string(bytes[p]) +
                                     ": a mask byte is 1 (the id is learned) or 0 (it is not)");
    }
    if (bytes[p] == 0 || p == 0) continue;  // id 0 is never a target
    ++mask.learned_;
    // Id p is target t = p - s - 1 of the windows starting at s in [p - window, p - 1].
    const std::int64_t first = std::max<std::int64_t>(0, p - window);
    const std::int64_t last = std::min(p - 1, last_start);
    if (mask.run_first_.empty() || first > run_last + 1) {
      mask.run_first_.push_back(first);
      mask.run_offset_.push_back(mask.starts_);
      mask.starts_ += last - first + 1;
    } else {
      mask.starts_ += last - run_last;
    }
    run_last = last;
  }
  if (mask.learned_ == 0) {
    return Status::InvalidArgument("data.loss_masks: " + path + ": no id after the first is " +
                                   "marked 1: nothing of " + ids_path + " would be learned");
  }
  return mask;
}

std::int64_t LossMask::Start(std::int64_t k) const {
  // The last run whose offset is at most k.
  const auto run = std::upper_bound(run_offset_.begin(), run_offset_.end(), k) - 1;
  const auto index = run - run_offset_.begin();
  return run_first_[static_cast<std::size_t>(index)] + (k - *run);
}

}  // namespace trainerd
