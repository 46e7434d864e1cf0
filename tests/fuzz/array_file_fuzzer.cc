// libFuzzer harness for the array file headers of data.format: tensors: any bytes as a
// `.npy` file and as a `.safetensors` file. Each reader must return arrays whose element bytes
// lie inside the file, or an error naming the file; never throw, crash, leak or read past
// the end. Every accepted integer array is then read (IntegerElement), so a bounds check
// the reader got wrong is an out-of-bounds read ASan reports. Seeds:
// corpus/array_file/ (files written by numpy.save and safetensors.numpy.save_file).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "trainerd/common/array_file.h"

namespace {

void CheckArray(const trainerd::ArrayView& array, const std::uint8_t* data, std::size_t size) {
  trainerd::fuzz::Expect(array.offset <= size && array.bytes <= size - array.offset,
                         "array bytes outside the file");
  if (trainerd::IsFloatingPoint(array.type)) return;
  // A copy of exactly the array's bytes: ASan sees a read past them.
  const std::vector<std::uint8_t> elements(data + array.offset, data + array.offset + array.bytes);
  const auto count = array.bytes / static_cast<std::size_t>(trainerd::ElementBytes(array.type));
  for (std::size_t i = 0; i < count; ++i)
    (void)trainerd::IntegerElement(elements.data(), array.type, i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string kPath = "fuzz/array";
  // Exactly `size` bytes on the heap, so a read past the end is ASan's to see.
  const std::vector<std::uint8_t> file(data, data + size);
  const std::uint8_t* bytes = file.empty() ? nullptr : file.data();
  const trainerd::Result<trainerd::ArrayView> npy = trainerd::ReadNpyHeader(bytes, size, kPath);
  if (npy.ok()) {
    CheckArray(*npy, bytes, size);
  } else {
    trainerd::fuzz::Expect(npy.status().message().find(kPath) != std::string::npos,
                           "error does not name the file: " + npy.status().message());
  }
  const auto tensors = trainerd::ReadSafetensorsHeader(bytes, size, kPath);
  if (tensors.ok()) {
    for (const auto& [name, array] : *tensors) CheckArray(array, bytes, size);
  } else {
    trainerd::fuzz::Expect(tensors.status().message().find(kPath) != std::string::npos,
                           "error does not name the file: " + tensors.status().message());
  }
  return 0;
}
