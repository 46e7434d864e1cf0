#include "data/tokens/loss_mask.h"

namespace trainerd {

Result<LossMask> LossMask::Load(const std::string& path, const std::string& ids_path,
                                std::int64_t ids) {
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
  for (std::int64_t p = 0; p < ids; ++p) {
    if (bytes[p] > 1) {
      return Status::InvalidArgument("data.loss_masks: " + path + ": byte " + std::to_string(p) +
                                     " is " + std::to_string(bytes[p]) +
                                     ": a mask byte is 1 (the id is learned) or 0 (it is not)");
    }
    if (p > 0) mask.learned_ += bytes[p];  // id 0 is never a target
  }
  if (mask.learned_ == 0) {
    return Status::InvalidArgument("data.loss_masks: " + path + ": no id after the first is " +
                                   "marked 1: nothing of " + ids_path + " would be learned");
  }
  return mask;
}

}  // namespace trainerd
