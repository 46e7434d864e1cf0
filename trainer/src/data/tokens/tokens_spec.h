// The keys of token data (data.format: tokens): flat little-endian arrays of token ids
// (train.bin, val.bin) that the team's tokenizer wrote, and optionally a loss mask beside each
// (train.mask, val.mask). Torch-free: the job spec reads them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"

namespace trainerd {

struct TokenDataKeys {
  std::string train;              // the training ids, absolute after parsing
  std::vector<std::string> eval;  // one evaluation slice each, named by stem
  int token_bytes = 2;            // data.dtype: 2 (uint16) or 4 (uint32)
  bool loss_masks = false;        // each file's mask beside it (data/tokens/loss_mask.h)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TokenDataKeys, train, eval, token_bytes, loss_masks)

// The data: section of token data of `keys`: jobs built in code start from it.
DataSpec TokenDataSpec(const TokenDataKeys& keys);

}  // namespace trainerd
