#include "trainerd/trainer/data/array_tensor.h"

#include <torch/torch.h>

namespace trainerd {

torch::ScalarType ScalarTypeOf(ElementType type) {
  switch (type) {
    case ElementType::kF16:
      return torch::kHalf;
    case ElementType::kBF16:
      return torch::kBFloat16;
    case ElementType::kF32:
      return torch::kFloat;
    case ElementType::kF64:
      return torch::kDouble;
    case ElementType::kBool:
      return torch::kBool;
    case ElementType::kU8:
      return torch::kByte;
    case ElementType::kI8:
      return torch::kChar;
    case ElementType::kI16:
      return torch::kShort;
    case ElementType::kI32:
      return torch::kInt;
    case ElementType::kI64:
      return torch::kLong;
  }
  return torch::kFloat;
}

torch::Tensor MappedTensor(const MappedFile& file, const ArrayView& array) {
  return torch::from_blob(const_cast<unsigned char*>(file.data() + array.offset), array.shape,
                          torch::TensorOptions().dtype(ScalarTypeOf(array.type)));
}

}  // namespace trainerd
