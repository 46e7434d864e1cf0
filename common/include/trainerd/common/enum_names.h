// One table of names per enum: its ToString, its parser and the list of allowed values a
// config error shows all read the same table, so a value added to an enum is named in one
// place. Tables are constexpr arrays of {value, name}:
//
//   inline constexpr EnumNames<Precision, 3> kPrecisionNames{{
//       {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}}};
//   kPrecisionNames.Name(Precision::kBf16)    -> "bf16"
//   kPrecisionNames.Parse("fp16")             -> Precision::kFp16; "fp64" -> nullopt
//   kPrecisionNames.Names()                   -> {"fp32", "bf16", "fp16"}
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainerd {

template <typename Enum, std::size_t N>
struct EnumNames {
  std::array<std::pair<Enum, const char*>, N> entries;

  // The value's name; "unknown" for a value the table lacks (a cast integer).
  constexpr const char* Name(Enum value) const {
    for (const auto& [v, name] : entries) {
      if (v == value) return name;
    }
    return "unknown";
  }
  constexpr std::optional<Enum> Parse(std::string_view name) const {
    for (const auto& [v, n] : entries) {
      if (name == n) return v;
    }
    return std::nullopt;
  }
  // Every name, in the table's order: the allowed values of a config key.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& entry : entries) names.emplace_back(entry.second);
    return names;
  }
  // Every value, in the table's order.
  std::vector<Enum> Values() const {
    std::vector<Enum> values;
    for (const auto& entry : entries) values.push_back(entry.first);
    return values;
  }
};

}  // namespace trainerd
