#include "loop/safetensors_writer.h"

#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "trainerd/common/atomic_file.h"

namespace trainerd {

std::string SafetensorsDtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat:
      return "F32";
    case torch::kDouble:
      return "F64";
    case torch::kHalf:
      return "F16";
    case torch::kBFloat16:
      return "BF16";
    case torch::kLong:
      return "I64";
    case torch::kInt:
      return "I32";
    case torch::kShort:
      return "I16";
    case torch::kChar:
      return "I8";
    case torch::kByte:
      return "U8";
    case torch::kBool:
      return "BOOL";
    default:
      return "";
  }
}

Status WriteSafetensors(const std::string& path, const NamedTensors& tensors,
                        const std::map<std::string, std::string>& metadata) {
  NamedTensors sorted = tensors;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<torch::Tensor> contiguous;
  std::size_t offset = 0;
  for (const auto& [name, tensor] : sorted) {
    const std::string dtype = SafetensorsDtype(tensor.scalar_type());
    if (dtype.empty()) {
      return Status::InvalidArgument(path + ": tensor '" + name + "' has dtype " +
                                     std::string(c10::toString(tensor.scalar_type())) +
                                     ", which .safetensors cannot name");
    }
    if (!names.insert(name).second) {
      return Status::InvalidArgument(path + ": tensor '" + name + "' given twice");
    }
    contiguous.push_back(tensor.detach().to(torch::kCPU).contiguous());
    const auto bytes = static_cast<std::size_t>(contiguous.back().nbytes());
    header[name] = {{"dtype", dtype},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  TemporaryFile temporary(path);
  {
    std::ofstream out(temporary.path(), std::ios::binary | std::ios::trunc);
    const std::uint64_t length = text.size();
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>((length >> (8 * b)) & 0xff));
    out << text;
    static_assert(std::endian::native == std::endian::little, "tensors are written as is");
    for (const torch::Tensor& t : contiguous) {
      out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    }
    out.close();
    if (!out) return Status::IOError(path + ": write failed");
  }
  return temporary.Commit();
}

}  // namespace trainerd
