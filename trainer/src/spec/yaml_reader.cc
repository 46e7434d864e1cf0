#include "trainerd/trainer/spec/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "trainerd/trainer/spec/units.h"

namespace trainerd {

Result<std::string> ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::NotFound(path + ": cannot open: no such file");
  if (std::filesystem::is_directory(path, ec))
    return Status::IOError(path + ": cannot open: is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path + ": cannot open: permission denied");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<YAML::Node> LoadYamlMapping(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) +
                                   ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(origin + ": expected a YAML mapping at the top level");
  }
  return root;
}

std::string AbsolutePath(const std::string& file, const std::string& base_dir) {
  const std::filesystem::path p(file);
  return p.is_relative() ? (std::filesystem::path(base_dir) / p).lexically_normal().string() : file;
}

namespace {

std::string Scalar(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

std::string Num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// 86400 -> "24h", 120 -> "2m", 0 -> "0s": bounds in duration errors, in the units users write.
std::string CompactDuration(double seconds) {
  if (seconds != 0 && std::fmod(seconds, 3600) == 0) return Num(seconds / 3600) + "h";
  if (seconds != 0 && std::fmod(seconds, 60) == 0) return Num(seconds / 60) + "m";
  return Num(seconds) + "s";
}

// A plain YAML scalar as the JSON value YAML 1.2's core schema reads it as; a quoted one is a
// string.
nlohmann::json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  if (text == "true" || text == "false") return text == "true";
  std::int64_t integer = 0;
  double number = 0;
  if (YAML::convert<std::int64_t>::decode(node, integer)) return integer;
  if (YAML::convert<double>::decode(node, number)) return number;
  return text;
}

nlohmann::json YamlToJson(const YAML::Node& node) {
  if (node.IsScalar()) return ScalarToJson(node);
  if (node.IsSequence()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& item : node) list.push_back(YamlToJson(item));
    return list;
  }
  if (node.IsMap()) {
    nlohmann::json map = nlohmann::json::object();
    for (const auto& entry : node) map[entry.first.Scalar()] = YamlToJson(entry.second);
    return map;
  }
  return nullptr;
}

}  // namespace

YamlReader::YamlReader(const YAML::Node& node, std::string origin, std::string prefix)
    : YamlReader(node, std::move(origin), std::move(prefix),
                 std::make_shared<std::vector<std::string>>()) {}

YamlReader::YamlReader(const YAML::Node& node, std::string origin, std::string prefix,
                       std::shared_ptr<std::vector<std::string>> errors)
    : node_(node),
      origin_(std::move(origin)),
      prefix_(std::move(prefix)),
      errors_(std::move(errors)) {}

std::string YamlReader::Where(const YAML::Node& at, const std::string& key) const {
  const YAML::Mark mark = at.Mark();
  std::string where = origin_;
  if (mark.line >= 0) where += ":" + std::to_string(mark.line + 1);
  where += ": ";
  where += prefix_.empty() ? key : prefix_ + "." + key;
  return where;
}

void YamlReader::FailAt(const YAML::Node& at, const std::string& key, const std::string& expected) {
  errors_->push_back(Where(at, key) + ": expected " + expected + ", got " + Scalar(at));
}

void YamlReader::Fail(const std::string& key, const std::string& expected, const std::string& got) {
  const YAML::Node at = node_.IsMap() && node_[key] ? node_[key] : node_;
  errors_->push_back(Where(at, key) + ": expected " + expected + ", got " + got);
}

bool YamlReader::Has(const std::string& key) {
  read_keys_.insert(key);
  return node_.IsMap() && node_[key];
}

std::optional<YAML::Node> YamlReader::Lookup(const std::string& key) {
  read_keys_.insert(key);
  if (!node_.IsMap()) return std::nullopt;
  YAML::Node value = node_[key];
  if (!value) return std::nullopt;
  return value;
}

void YamlReader::Int(const std::string& key, int* out, int min, int max) {
  auto value = Lookup(key);
  if (!value) return;
  const std::string expected =
      "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  long long parsed = 0;
  if (!value->IsScalar() || !YAML::convert<long long>::decode(*value, parsed) || parsed < min ||
      parsed > max) {
    FailAt(*value, key, expected);
    return;
  }
  *out = static_cast<int>(parsed);
}

void YamlReader::UInt64(const std::string& key, std::uint64_t* out) {
  auto value = Lookup(key);
  if (!value) return;
  std::uint64_t parsed = 0;
  if (!value->IsScalar() || value->Scalar().starts_with("-") ||
      !YAML::convert<std::uint64_t>::decode(*value, parsed)) {
    FailAt(*value, key, "a non-negative integer");
    return;
  }
  *out = parsed;
}

void YamlReader::Double(const std::string& key, double* out, double min, double max,
                        bool min_open) {
  auto value = Lookup(key);
  if (!value) return;
  double parsed = 0;
  if (!value->IsScalar() || !YAML::convert<double>::decode(*value, parsed) ||
      !std::isfinite(parsed) || (min_open ? parsed <= min : parsed < min) || parsed > max) {
    FailAt(*value, key,
           std::string("a number in ") + (min_open ? "(" : "[") + Num(min) + ", " + Num(max) + "]");
    return;
  }
  *out = parsed;
}

void YamlReader::Bool(const std::string& key, bool* out) {
  auto value = Lookup(key);
  if (!value) return;
  bool parsed = false;
  if (!value->IsScalar() || !YAML::convert<bool>::decode(*value, parsed)) {
    FailAt(*value, key, "true or false");
    return;
  }
  *out = parsed;
}

void YamlReader::String(const std::string& key, std::string* out,
                        const std::vector<std::string>& allowed) {
  auto value = Lookup(key);
  if (!value) return;
  std::string expected = "a string";
  if (!allowed.empty()) {
    expected = "one of";
    for (const auto& a : allowed) expected += " " + a;
  }
  if (!value->IsScalar()) {
    FailAt(*value, key, expected);
    return;
  }
  if (!allowed.empty() &&
      std::find(allowed.begin(), allowed.end(), value->Scalar()) == allowed.end()) {
    FailAt(*value, key, expected);
    return;
  }
  *out = value->Scalar();
}

void YamlReader::StringList(const std::string& key, std::vector<std::string>* out) {
  auto value = Lookup(key);
  if (!value) return;
  if (!value->IsSequence() || value->size() == 0) {
    FailAt(*value, key, "a non-empty list of strings");
    return;
  }
  std::vector<std::string> parsed;
  for (const auto& item : *value) {
    if (!item.IsScalar()) {
      FailAt(item, key, "a string list item");
      return;
    }
    parsed.push_back(item.Scalar());
  }
  *out = std::move(parsed);
}

void YamlReader::JsonMap(const std::string& key, nlohmann::json* out) {
  auto value = Lookup(key);
  if (!value) return;
  if (!value->IsMap()) {
    FailAt(*value, key, "a mapping of option names to values");
    return;
  }
  *out = YamlToJson(*value);
}

void YamlReader::Bytes(const std::string& key, std::int64_t* out) {
  auto value = Lookup(key);
  if (!value) return;
  Result<std::int64_t> parsed = value->IsScalar()
                                    ? ParseBytes(value->Scalar())
                                    : Result<std::int64_t>(Status::InvalidArgument(""));
  if (!parsed.ok() || *parsed <= 0) {
    FailAt(*value, key, "a positive size such as 24GiB, 512MiB or 0.34GB");
    return;
  }
  *out = *parsed;
}

void YamlReader::DurationSeconds(const std::string& key, std::optional<double>* out) {
  auto value = Lookup(key);
  if (!value) return;
  Result<double> parsed = value->IsScalar() ? ParseDurationSeconds(value->Scalar())
                                            : Result<double>(Status::InvalidArgument(""));
  if (!parsed.ok() || *parsed <= 0) {
    FailAt(*value, key, "a positive duration such as 6h, 90m or 45s");
    return;
  }
  *out = *parsed;
}

void YamlReader::DurationSeconds(const std::string& key, double* out, double min, double max,
                                 bool min_open) {
  auto value = Lookup(key);
  if (!value) return;
  Result<double> parsed = value->IsScalar() ? ParseDurationSeconds(value->Scalar())
                                            : Result<double>(Status::InvalidArgument(""));
  if (!parsed.ok() || (min_open ? *parsed <= min : *parsed < min) || *parsed > max) {
    FailAt(*value, key,
           std::string("a duration in ") + (min_open ? "(" : "[") + CompactDuration(min) + ", " +
               CompactDuration(max) + "] such as 6h, 90m or 45s");
    return;
  }
  *out = *parsed;
}

void YamlReader::IntOrAuto(const std::string& key, int* out, int min, int max) {
  if (Has(key) && node_[key].IsScalar() && node_[key].Scalar() == "auto") {
    read_keys_.insert(key);
    *out = 0;
    return;
  }
  auto value = Lookup(key);
  if (!value) return;
  long long parsed = 0;
  if (!value->IsScalar() || !YAML::convert<long long>::decode(*value, parsed) || parsed < min ||
      parsed > max) {
    FailAt(*value, key,
           "auto or an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return;
  }
  *out = static_cast<int>(parsed);
}

void YamlReader::IntListOr(const std::string& key, std::vector<int>* out, std::string* word,
                           const std::vector<std::string>& words, int min, int max) {
  auto value = Lookup(key);
  if (!value) return;
  std::string expected;
  for (const auto& w : words) expected += w + " or ";
  expected += "a list of integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (value->IsScalar() && std::find(words.begin(), words.end(), value->Scalar()) != words.end()) {
    *word = value->Scalar();
    return;
  }
  if (!value->IsSequence()) {
    FailAt(*value, key, expected);
    return;
  }
  std::vector<int> parsed;
  for (const auto& item : *value) {
    long long n = 0;
    if (!item.IsScalar() || !YAML::convert<long long>::decode(item, n) || n < min || n > max) {
      FailAt(item, key, expected);
      return;
    }
    parsed.push_back(static_cast<int>(n));
  }
  word->clear();
  *out = std::move(parsed);
}

void YamlReader::Fraction(const std::string& key, double* out, double min, double max) {
  auto value = Lookup(key);
  if (!value) return;
  const Result<double> parsed = value->IsScalar()
                                    ? ParseFraction(value->Scalar())
                                    : Result<double>(Status::InvalidArgument("not a scalar"));
  if (!parsed.ok() || *parsed < min || *parsed > max) {
    FailAt(*value, key, "a fraction in [" + Num(min) + ", " + Num(max) + "] such as 0.1 or 10%");
    return;
  }
  *out = *parsed;
}

void YamlReader::FractionMap(const std::string& key, std::map<std::string, double>* out, double min,
                             double max) {
  auto value = Lookup(key);
  if (!value) return;
  const std::string expected =
      "a fraction in [" + Num(min) + ", " + Num(max) + "] such as 0.1 or 10%";
  if (!value->IsMap()) {
    FailAt(*value, key, "a mapping of names to fractions");
    return;
  }
  std::map<std::string, double> parsed;
  for (const auto& entry : *value) {
    if (!entry.first.IsScalar()) {
      FailAt(entry.first, key, "a mapping of names to fractions");
      return;
    }
    const std::string name = entry.first.Scalar();
    const Result<double> fraction = entry.second.IsScalar()
                                        ? ParseFraction(entry.second.Scalar())
                                        : Result<double>(Status::InvalidArgument("not a scalar"));
    if (!fraction.ok() || *fraction < min || *fraction > max) {
      FailAt(entry.second, key + "." + name, expected);
      return;
    }
    parsed[name] = *fraction;
  }
  *out = std::move(parsed);
}

YamlReader YamlReader::Child(const std::string& key) {
  auto value = Lookup(key);
  const std::string child_prefix = prefix_.empty() ? key : prefix_ + "." + key;
  if (value && !value->IsMap()) {
    FailAt(*value, key, "a mapping");
    return YamlReader(YAML::Node(YAML::NodeType::Map), origin_, child_prefix, errors_);
  }
  return YamlReader(value ? *value : YAML::Node(YAML::NodeType::Map), origin_, child_prefix,
                    errors_);
}

std::vector<YamlReader> YamlReader::ChildList(const std::string& key) {
  std::vector<YamlReader> children;
  const auto value = Lookup(key);
  if (!value) return children;
  if (!value->IsSequence()) {
    FailAt(*value, key, "a list of mappings");
    return children;
  }
  const std::string list_prefix = prefix_.empty() ? key : prefix_ + "." + key;
  for (std::size_t i = 0; i < value->size(); ++i) {
    const YAML::Node item = (*value)[i];
    const std::string index = "[" + std::to_string(i) + "]";
    if (!item.IsMap()) {
      FailAt(item, key + index, "a mapping");
      continue;
    }
    children.push_back(YamlReader(item, origin_, list_prefix + index, errors_));
  }
  return children;
}

void YamlReader::RejectUnknownKeys() {
  if (!node_.IsMap()) return;
  for (const auto& entry : node_) {
    // "? [a, b]: 1" is valid YAML; no key of ours is a list or a mapping, and as<std::string>()
    // would throw on one.
    if (entry.first.IsSequence() || entry.first.IsMap()) {
      const YAML::Mark mark = entry.first.Mark();
      errors_->push_back(origin_ + ":" + std::to_string(mark.line + 1) + ": " +
                         (prefix_.empty() ? "top level" : prefix_) + ": expected a key name, got " +
                         Scalar(entry.first));
      continue;
    }
    const std::string key = entry.first.as<std::string>();
    if (read_keys_.count(key) == 0) {
      std::string known;
      for (const auto& k : read_keys_) known += (known.empty() ? "" : ", ") + k;
      const YAML::Mark mark = entry.first.Mark();
      errors_->push_back(origin_ + ":" + std::to_string(mark.line + 1) + ": " +
                         (prefix_.empty() ? key : prefix_ + "." + key) +
                         ": unknown key (known keys here: " + known + ")");
    }
  }
}

}  // namespace trainerd
