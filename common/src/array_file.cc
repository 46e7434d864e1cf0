#include "trainerd/common/array_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "trainerd/common/json_input.h"

namespace trainerd {
namespace {

struct TypeName {
  ElementType type;
  const char* name;  // as docs and errors say it
  const char* npy;   // numpy's descr
  const char* safetensors;
  int bytes;
};

constexpr TypeName kTypes[] = {
    {ElementType::kF16, "float16", "<f2", "F16", 2},
    {ElementType::kBF16, "bfloat16", "", "BF16", 2},  // numpy has no bfloat16
    {ElementType::kF32, "float32", "<f4", "F32", 4},
    {ElementType::kF64, "float64", "<f8", "F64", 8},
    {ElementType::kBool, "bool", "|b1", "BOOL", 1},
    {ElementType::kU8, "uint8", "|u1", "U8", 1},
    {ElementType::kI8, "int8", "|i1", "I8", 1},
    {ElementType::kI16, "int16", "<i2", "I16", 2},
    {ElementType::kI32, "int32", "<i4", "I32", 4},
    {ElementType::kI64, "int64", "<i8", "I64", 8},
};

const TypeName& Describe(ElementType type) {
  for (const TypeName& t : kTypes) {
    if (t.type == type) return t;
  }
  return kTypes[0];
}

// The element types a data file may use, for errors.
std::string Supported() {
  std::string names;
  for (const TypeName& t : kTypes) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

// product(shape) * bytes, or nullopt when a dimension is negative or the product overflows.
bool ElementBytesOf(const std::vector<std::int64_t>& shape, int bytes, std::size_t* out) {
  std::size_t total = static_cast<std::size_t>(bytes);
  for (const std::int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && total > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(d)) {
      return false;
    }
    total *= static_cast<std::size_t>(d);
  }
  *out = total;
  return true;
}

std::uint64_t ReadLittleEndian(const unsigned char* at, int bytes) {
  std::uint64_t value = 0;
  for (int b = bytes - 1; b >= 0; --b) value = (value << 8) | at[b];
  return value;
}

// The text after `'key':` in a .npy header dict (leading spaces skipped); false without it.
bool HeaderValue(const std::string& header, const std::string& key, std::string* value) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return false;
  std::size_t p = at + key.size() + 2;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size() || header[p] != ':') return false;
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  *value = header.substr(p);
  return true;
}

// "512, 16" or "512," or "" (a 0-d array) as sizes; false for anything else.
bool ParseDims(const std::string& dims, std::vector<std::int64_t>* shape) {
  std::size_t p = 0;
  const auto skip_spaces = [&] {
    while (p < dims.size() && dims[p] == ' ') ++p;
  };
  skip_spaces();
  while (p < dims.size()) {
    std::size_t digits = 0;
    std::int64_t value = 0;
    while (p < dims.size() && dims[p] >= '0' && dims[p] <= '9' && digits < 18) {
      value = value * 10 + (dims[p] - '0');
      ++p;
      ++digits;
    }
    if (digits == 0) return false;
    shape->push_back(value);
    skip_spaces();
    if (p < dims.size() && dims[p] == ',')
      ++p;
    else if (p < dims.size())
      return false;
    skip_spaces();
  }
  return true;
}

Status Bad(const std::string& path, const std::string& what) {
  return Status::InvalidArgument("data file " + path + ": " + what);
}

}  // namespace

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

int ElementBytes(ElementType type) { return Describe(type).bytes; }
const char* ToString(ElementType type) { return Describe(type).name; }
bool IsFloatingPoint(ElementType type) {
  return type == ElementType::kF16 || type == ElementType::kBF16 || type == ElementType::kF32 ||
         type == ElementType::kF64;
}

Result<ArrayView> ReadNpyHeader(const unsigned char* data, std::size_t size,
                                const std::string& path) {
  static const unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
    return Bad(path, "not a .npy file (no \\x93NUMPY magic; write it with numpy.save)");
  }
  const int major = data[6];
  if (major < 1 || major > 3) {
    return Bad(path, ".npy format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t header_start = 8 + length_bytes;
  if (size < header_start) return Bad(path, "truncated in its .npy header");
  const std::size_t header_length = ReadLittleEndian(data + 8, static_cast<int>(length_bytes));
  if (header_length > size - header_start) return Bad(path, "truncated in its .npy header");
  const std::string header(reinterpret_cast<const char*>(data + header_start), header_length);

  std::string descr, fortran, dims;
  if (!HeaderValue(header, "descr", &descr) || descr.size() < 2 || descr.front() != '\'' ||
      descr.find('\'', 1) == std::string::npos) {
    return Bad(path, ".npy header without 'descr'");
  }
  descr = descr.substr(1, descr.find('\'', 1) - 1);
  ArrayView array;
  bool known = false;
  for (const TypeName& t : kTypes) {
    const std::string npy = t.npy;
    if (npy.empty()) continue;  // no numpy name
    // numpy writes '|u1' for one-byte types but accepts '<u1' too.
    const bool little_endian_alias =
        npy[0] == '|' && !descr.empty() && descr[0] == '<' && descr.substr(1) == npy.substr(1);
    if (descr == npy || little_endian_alias) {
      array.type = t.type;
      known = true;
    }
  }
  if (!known) {
    return Bad(path, "element type '" + descr + "' is not one of " + Supported() +
                         " (little-endian; convert with array.astype(...))");
  }
  if (!HeaderValue(header, "fortran_order", &fortran) ||
      (!fortran.starts_with("True") && !fortran.starts_with("False"))) {
    return Bad(path, ".npy header without 'fortran_order'");
  }
  if (fortran.starts_with("True")) {
    return Bad(path, "Fortran-ordered array; save numpy.ascontiguousarray(array) instead");
  }
  if (!HeaderValue(header, "shape", &dims) || dims.empty() || dims.front() != '(' ||
      dims.find(')') == std::string::npos) {
    return Bad(path, ".npy header without 'shape'");
  }
  dims = dims.substr(1, dims.find(')') - 1);
  if (!ParseDims(dims, &array.shape))
    return Bad(path, ".npy shape (" + dims + ") is not a tuple of sizes");
  array.offset = header_start + header_length;
  if (!ElementBytesOf(array.shape, ElementBytes(array.type), &array.bytes)) {
    return Bad(path, "the .npy shape (" + dims + ") is too large");
  }
  if (array.bytes > size - array.offset) {
    return Bad(path, "truncated: the header's shape (" + dims + ") of " + ToString(array.type) +
                         " needs " + std::to_string(array.bytes) + " bytes of data, the file has " +
                         std::to_string(size - array.offset));
  }
  return array;
}

Result<std::map<std::string, ArrayView>> ReadSafetensorsHeader(const unsigned char* data,
                                                               std::size_t size,
                                                               const std::string& path) {
  if (size < 8) return Bad(path, "truncated: shorter than a .safetensors header length");
  const std::uint64_t header_length = ReadLittleEndian(data, 8);
  if (header_length > size - 8) {
    return Bad(path, "truncated: its .safetensors header says " + std::to_string(header_length) +
                         " bytes, the file has " + std::to_string(size - 8) + " after the length");
  }
  const nlohmann::json header =
      ParseBoundedJson(std::string_view(reinterpret_cast<const char*>(data) + 8, header_length));
  if (!header.is_object()) return Bad(path, "the .safetensors header is not a JSON object");
  const std::size_t data_start = 8 + header_length;
  std::map<std::string, ArrayView> arrays;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "': ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array() || !entry.contains("data_offsets") ||
        !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2 ||
        !entry["data_offsets"][0].is_number_unsigned() ||
        !entry["data_offsets"][1].is_number_unsigned()) {
      return Bad(path, where + "expected {dtype, shape, data_offsets: [begin, end]}");
    }
    ArrayView array;
    const std::string dtype = entry["dtype"];
    const auto known = std::find_if(std::begin(kTypes), std::end(kTypes),
                                    [&](const TypeName& t) { return dtype == t.safetensors; });
    if (known == std::end(kTypes)) {
      return Bad(path, where + "dtype " + dtype + " is not one of " + Supported());
    }
    array.type = known->type;
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) return Bad(path, where + "a shape of non-negative integers");
      array.shape.push_back(d.get<std::int64_t>());
    }
    const auto begin = entry["data_offsets"][0].get<std::uint64_t>();
    const auto end = entry["data_offsets"][1].get<std::uint64_t>();
    if (!ElementBytesOf(array.shape, ElementBytes(array.type), &array.bytes) || begin > end ||
        end - begin != array.bytes) {
      return Bad(path, where + "data_offsets [" + std::to_string(begin) + ", " +
                           std::to_string(end) + "] do not hold its shape of " + dtype);
    }
    if (end > size - data_start) {
      return Bad(path, "truncated: " + where + "ends at byte " + std::to_string(data_start + end) +
                           " of a " + std::to_string(size) + "-byte file");
    }
    array.offset = data_start + begin;
    arrays.emplace(name, array);
  }
  return arrays;
}

std::int64_t IntegerElement(const unsigned char* elements, ElementType type, std::size_t index) {
  const int width = ElementBytes(type);
  const bool is_signed = type == ElementType::kI8 || type == ElementType::kI16 ||
                         type == ElementType::kI32 || type == ElementType::kI64;
  std::uint64_t raw = ReadLittleEndian(elements + index * width, width);
  if (is_signed && width < 8 && (raw >> (8 * width - 1)) != 0) {
    raw |= ~std::uint64_t{0} << (8 * width);  // sign-extend
  }
  return static_cast<std::int64_t>(raw);
}

}  // namespace trainerd
