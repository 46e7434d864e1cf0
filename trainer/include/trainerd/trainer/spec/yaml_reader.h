// Typed, strict access to a YAML mapping: every key read is remembered so that unknown keys
// can be reported, and every error carries "file:line: dotted.key: expected ..., got ...".
// Not thread-safe; one per parse. Errors are collected, the first one is reported.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trainerd/common/status.h"

namespace trainerd {

// The text of the config file at `path`; NotFound (no such file) or IOError (a directory,
// unreadable) naming the path.
Result<std::string> ReadConfigFile(const std::string& path);
// Parses `text` as YAML whose top level is a mapping; errors name `origin` and the line.
Result<YAML::Node> LoadYamlMapping(const std::string& text, const std::string& origin);
// `file` as a config gives it: relative to `base_dir` (the config's folder) unless absolute.
std::string AbsolutePath(const std::string& file, const std::string& base_dir);

class YamlReader {
 public:
  // `node` must outlive the reader. `prefix` is the dotted path of `node` ("" for the root).
  YamlReader(const YAML::Node& node, std::string origin, std::string prefix);

  // Each reader leaves `*out` untouched when the key is absent and records an error when
  // it is present but invalid.
  void Int(const std::string& key, int* out, int min, int max);
  void UInt64(const std::string& key, std::uint64_t* out);
  void Double(const std::string& key, double* out, double min, double max, bool min_open = false);
  void Bool(const std::string& key, bool* out);
  void String(const std::string& key, std::string* out, const std::vector<std::string>& allowed);
  void StringList(const std::string& key, std::vector<std::string>* out);
  void Bytes(const std::string& key, std::int64_t* out);
  void DurationSeconds(const std::string& key, std::optional<double>* out);
  // A duration in [min, max] seconds ((min, max] when min_open), e.g. a grace period that
  // may be 0 ("0s") or a window of at most a day.
  void DurationSeconds(const std::string& key, double* out, double min, double max,
                       bool min_open = false);
  // Integer or "auto" (stored as 0).
  void IntOrAuto(const std::string& key, int* out, int min, int max);
  // Either one of `words` (stored in *word, *out untouched) or a list of integers in
  // [min, max] (stored in *out, *word cleared).
  void IntListOr(const std::string& key, std::vector<int>* out, std::string* word,
                 const std::vector<std::string>& words, int min, int max);
  // A fraction written as 0.1 or "10%".
  void Fraction(const std::string& key, double* out, double min, double max);
  // A mapping of free-form names to fractions in [min, max], e.g. per-slice overrides
  // ({GPL-3: 5%}). The names are data, not schema, so any name is accepted; an error names
  // the entry as "key.name". On success *out is replaced by the mapping's entries.
  void FractionMap(const std::string& key, std::map<std::string, double>* out, double min,
                   double max);
  // A mapping whose keys are not schema (a plugin model's options), handed on as JSON:
  // plain scalars become integers, numbers, booleans or null where YAML reads them so,
  // quoted ones strings; lists and nested mappings keep their shape.
  void JsonMap(const std::string& key, nlohmann::json* out);

  // A nested mapping; absent keys give an empty reader. Errors propagate to this reader.
  YamlReader Child(const std::string& key);
  // A list of mappings, a reader for each (errors name "key[i].field"); none when absent.
  std::vector<YamlReader> ChildList(const std::string& key);
  // Whether `key` is present; it is a known key either way (the unknown-key error lists it).
  bool Has(const std::string& key);

  // Records an error about `key` of this mapping, e.g. for cross-field checks.
  void Fail(const std::string& key, const std::string& expected, const std::string& got);
  // Reports keys present in the mapping that were never read. Call after all reads.
  void RejectUnknownKeys();

  bool ok() const { return errors_->empty(); }
  const std::string& first_error() const { return errors_->front(); }

 private:
  YamlReader(const YAML::Node& node, std::string origin, std::string prefix,
             std::shared_ptr<std::vector<std::string>> errors);
  std::optional<YAML::Node> Lookup(const std::string& key);
  std::string Where(const YAML::Node& at, const std::string& key) const;
  void FailAt(const YAML::Node& at, const std::string& key, const std::string& expected);

  YAML::Node node_;
  std::string origin_;
  std::string prefix_;
  std::set<std::string> read_keys_;
  std::shared_ptr<std::vector<std::string>> errors_;
};

}  // namespace trainerd
