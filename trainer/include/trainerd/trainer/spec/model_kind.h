// A model kind as the job spec knows it, without torch: how its keys of the job's `model:`
// section are read, and what those keys alone answer about the model. Every kind registers
// one under its name (TRAINERD_REGISTER_MODEL_KIND in its *_spec.cc), and its model under the
// same name in the models registry (models/model_registry.h). The parser, the job identity,
// the daemon and the planner ask the kind; none of them names one (docs/extending.md).
// Registration happens during static initialisation; lookups after it are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec.h"
#include "trainerd/trainer/spec/yaml_reader.h"

namespace trainerd {

// What a kind's reader is given besides its keys.
struct ModelKeysContext {
  std::string base_dir;     // relative paths (a model file) are relative to it
  ModelInputs data_inputs;  // what the job's data format gives by default (rows for tensors)
};

class ModelKind {
 public:
  virtual ~ModelKind() = default;

  // Reads the kind's keys of `model:` (all but `kind` and `block_size`, which every kind has)
  // into spec->options with every default filled in, and sets spec->inputs; a kind whose model
  // is the team's own also reads the keys of ReadOwnModelKeys. Errors go to `model`.
  virtual void Read(YamlReader& model, const ModelKeysContext& context, ModelSpec* spec) const = 0;

  // Blocks a plan may checkpoint as the keys give them; nullopt (the default) when only
  // loading the model counts them.
  virtual std::optional<int> DeclaredBlocks(const ModelSpec& /*spec*/) const {
    return std::nullopt;
  }
  // Whether a layer normalises over its microbatch (BatchNorm), from the keys; nullopt (the
  // default) when only the loaded model tells.
  virtual std::optional<bool> DeclaredBatchStatistics(const ModelSpec& /*spec*/) const {
    return std::nullopt;
  }

  // The key holding the file or folder the model is loaded from ("path", "library"): the
  // team's own model, whose content hash joins the job identity. "" for a model built from
  // its keys alone.
  virtual std::string FileKey() const { return ""; }
  // The SHA-256 of what in that file or folder changes what is trained, for the job identity:
  // by default all of it (a folder: every file by name and content, common/sha256.h).
  virtual Result<std::string> ContentSha256(const std::string& path) const;
  // Whether the model reads what model.inputs says (ReadOwnModelKeys): by default, a model
  // loaded from a file does.
  virtual bool ReadsModelInputs() const { return !FileKey().empty(); }
  // The key that sizes the model's outputs to cover the data ("vocab_size") and its value,
  // checked against the data before the model runs; nullopt when a forward on a sample of
  // the data tells (ResolveModel).
  struct DeclaredOutputs {
    std::string key;
    std::int64_t size = 0;
  };
  virtual std::optional<DeclaredOutputs> Outputs(const ModelSpec& /*spec*/) const {
    return std::nullopt;
  }
  // Whether the kind's models keep packed documents apart (semantics/document_positions.h:
  // positions restart and attention stays within each document); false: data that packs them
  // is refused for this kind.
  virtual bool KeepsDocumentsApart() const { return false; }
  // What model.loss: module asks of this kind's model, for the error when it lacks its own loss.
  virtual std::string OwnLossHint() const {
    return "a model that overrides Loss() and has_own_loss()";
  }
  // Keys of `options` that do not change what is trained, left out of the job identity: a
  // file's path (its content hash is in), a choice of kernels that computes the same job.
  virtual std::vector<std::string> NonIdentityKeys() const { return {}; }
};

// Adds `kind` under `name`; false (and nothing added) when a kind of that name exists.
bool RegisterModelKind(const std::string& name, std::unique_ptr<ModelKind> kind);
// The kind registered as `name`, or nullptr.
const ModelKind* FindModelKind(const std::string& name);
// Every registered name, sorted: the allowed values of model.kind.
std::vector<std::string> ModelKindNames();
// The kind of `spec`. REQUIRES: registered (the parser accepts no other).
const ModelKind& ModelKindOf(const ModelSpec& spec);

// The keys of a model that is the team's own (torchscript, plugin): model.inputs (by default
// what the data gives), model.loss and model.ignore_index, model.flops_per_sample.
void ReadOwnModelKeys(YamlReader& model, const ModelKeysContext& context, ModelSpec* spec);

}  // namespace trainerd

#define TRAINERD_SPEC_CONCAT_INNER(a, b) a##b
#define TRAINERD_SPEC_CONCAT(a, b) TRAINERD_SPEC_CONCAT_INNER(a, b)
// Registers a ModelKind subclass `KindClass` as `name` when the program starts. The library
// holding it is linked whole (CMake), so that no registration is dropped.
#define TRAINERD_REGISTER_MODEL_KIND(name, KindClass)                           \
  static const bool TRAINERD_SPEC_CONCAT(trainerd_registered_kind_, __LINE__) = \
      ::trainerd::RegisterModelKind((name), std::make_unique<KindClass>())
