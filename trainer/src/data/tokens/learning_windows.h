// The windows of token data worth drawing: those with at least one learned target. A target
// goes unlearned where a loss mask marks its id 0 (loss_mask.h) or where it begins a document
// (documents.h: predicting a document's first id from the one before it crosses documents). A
// window whose targets are all unlearned teaches nothing and costs a forward, and an update of
// such windows alone would divide by zero, so they are never drawn. Found in one pass at load
// as runs of consecutive starts; the k-th by binary search.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace trainerd {

class LearningWindows {
 public:
  // Over an id file of `ids` ids with windows of `window` + 1 ids (window start s has targets
  // s + 1 .. s + window), where id p (p >= 1) is learned as a target when `learned(p)`.
  static LearningWindows Find(std::int64_t ids, int window,
                              const std::function<bool(std::int64_t)>& learned);

  // The window starts that learn at least one target, and the k-th of them in file order.
  // REQUIRES: k < starts().
  std::int64_t starts() const { return starts_; }
  std::int64_t Start(std::int64_t k) const;

 private:
  std::int64_t starts_ = 0;
  // Runs of consecutive learning starts: where each begins, and the starts before it.
  std::vector<std::int64_t> run_first_;
  std::vector<std::int64_t> run_offset_;
};

}  // namespace trainerd
