// The arrays of a data.format: tensors dataset, read from the headers of the two formats
// pipelines already write: NumPy's `.npy` (numpy.save; versions 1.0 to 3.0, C order,
// little-endian) and `.safetensors` (safetensors.numpy / safetensors.torch save_file). Only the
// headers are parsed here; the element bytes stay in the (memory-mapped) file at `offset`.
// No torch, so a fuzz harness can drive it. Errors name the file and what is wrong with it:
// a truncated file, an element type LibTorch 1.13 has no tensor type for, Fortran order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

enum class ElementType { kF16, kBF16, kF32, kF64, kBool, kU8, kI8, kI16, kI32, kI64 };

// Bytes per element; "float32", "int64", ... as error messages and docs name them.
int ElementBytes(ElementType type);
// "[4, 32]": a shape as error messages show it.
std::string ShapeText(const std::vector<std::int64_t>& shape);
const char* ToString(ElementType type);
bool IsFloatingPoint(ElementType type);

struct ArrayView {
  ElementType type = ElementType::kF32;
  std::vector<std::int64_t> shape;  // [rows, ...]; a 0-d array has no rows
  std::size_t offset = 0;           // first element byte in the file
  std::size_t bytes = 0;            // element bytes: product(shape) * ElementBytes(type)
};

// The array of a whole `.npy` file of `size` bytes starting at `data`.
Result<ArrayView> ReadNpyHeader(const unsigned char* data, std::size_t size,
                                const std::string& path);

// Every tensor of a `.safetensors` file by name (its "__metadata__" entry is skipped).
Result<std::map<std::string, ArrayView>> ReadSafetensorsHeader(const unsigned char* data,
                                                               std::size_t size,
                                                               const std::string& path);

// Element `index` of integer (or bool) elements of `type` at `elements`, sign-extended.
// REQUIRES: !IsFloatingPoint(type).
std::int64_t IntegerElement(const unsigned char* elements, ElementType type, std::size_t index);

}  // namespace trainerd
