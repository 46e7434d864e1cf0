// data.loss_masks of token data: beside each id file its mask (train.bin -> train.mask), one
// byte per id, 1 where the id is learned as a next-token target and 0 where it is not (the
// prompts of a chat, the user's turns). Target t of a window starting at id s is id s + t + 1,
// so it carries loss when that id's byte is 1: `transformers`' labels, with -100 where the
// byte is 0. Only the windows that learn at least one target are drawn (learning_windows.h).
#pragma once

#include <cstdint>
#include <string>

#include "trainerd/common/status.h"
#include "trainerd/trainer/data/mapped_file.h"

namespace trainerd {

class LossMask {
 public:
  // Maps `path`, the mask of an id file of `ids` ids (`ids_path`, for errors), and checks it.
  // Errors name the file: missing, a size other than one byte per id, a byte other than 0 or 1
  // (at its offset), no id after the first marked 1 (nothing to learn).
  static Result<LossMask> Load(const std::string& path, const std::string& ids_path,
                               std::int64_t ids);

  const std::string& path() const { return file_.path(); }
  // Whether id `index` of the file is learned where it is a target.
  bool Learned(std::int64_t index) const { return file_.data()[index] == 1; }
  // Ids after the first marked 1: the targets the mask learns, of ids - 1.
  std::int64_t learned() const { return learned_; }
  std::int64_t targets() const { return static_cast<std::int64_t>(file_.size()) - 1; }

 private:
  MappedFile file_;
  std::int64_t learned_ = 0;
};

}  // namespace trainerd
