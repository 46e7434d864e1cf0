// The keys of token data (data.format: tokens): flat little-endian arrays of token ids
// (train.bin, val.bin) that the team's tokenizer wrote, optionally a loss mask beside each
// (train.mask, val.mask), and optionally the id that ends each document, packed several to a
// window or one to a window, padded. Torch-free: the job spec reads them.
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
  int document_end = -1;          // the id that ends each document (its EOS); -1: one stream
  bool packing = true;            // with document_end: documents packed (false: one, padded)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TokenDataKeys, train, eval, token_bytes, loss_masks,
                                                document_end, packing)

// The data: section of token data of `keys`: jobs built in code start from it.
DataSpec TokenDataSpec(const TokenDataKeys& keys);

}  // namespace trainerd
