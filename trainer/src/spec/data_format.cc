#include "trainerd/trainer/spec/data_format.h"

#include <map>
#include <stdexcept>

namespace trainerd {
namespace {

std::map<std::string, std::unique_ptr<DataFormat>>& Formats() {
  static std::map<std::string, std::unique_ptr<DataFormat>> formats;
  return formats;
}

}  // namespace

bool RegisterDataFormat(const std::string& name, std::unique_ptr<DataFormat> format) {
  return Formats().emplace(name, std::move(format)).second;
}

const DataFormat* FindDataFormat(const std::string& name) {
  const auto it = Formats().find(name);
  return it == Formats().end() ? nullptr : it->second.get();
}

std::vector<std::string> DataFormatNames() {
  std::vector<std::string> names;
  for (const auto& [name, format] : Formats()) names.push_back(name);
  return names;
}

const DataFormat& DataFormatOf(const DataSpec& spec) {
  const DataFormat* format = FindDataFormat(spec.format);
  if (format == nullptr) throw std::invalid_argument("no data format named '" + spec.format + "'");
  return *format;
}

}  // namespace trainerd
