// The job identity (spec/job_identity.h) walks every key the job-spec parser reads, for every
// model kind and data format: the keys are the parser's own ("known keys here: ..." of its
// unknown-key error), so a key added to the parser and not classified below fails here. Each
// key is set to another value: one that changes what is trained changes the identity, one
// that changes how it is trained (the plan, the kernels, the runtime, the launch) does not,
// and a file's path does not where its content's hash joins the identity instead.
#include "trainerd/trainer/spec/job_identity.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "trainerd/trainer/spec/job_spec_parser.h"

namespace trainerd {
namespace {

enum class Effect {
  kTrained,     // what is trained: the identity changes
  kNotTrained,  // how it is trained, or when it is evaluated and saved: it does not
  kContent,     // a file whose content's hash joins the identity, not its path
  kKind,        // model.kind, data.format: the keys themselves change (the bases below)
  kOnlyValue,   // a key with one allowed value (optimizer.kind: adamw)
  // finetune.method: its other value (full) refuses the adapters' keys the bases give;
  // AnAdapterJobIsNotTheFullJob checks it changes the identity. plan.step_in_backward: the
  // bases' two ranks and microbatches refuse it; TheStepInsideTheBackwardIsAPlan checks it.
  // plan.offload_activations: the bases' CPU, where the host is the device, refuses it;
  // TheActivationsOnTheHostAreAPlan checks it. data.document_end, data.packing: the tokens
  // base's TorchScript model refuses packed documents, and packing asks for documents;
  // DocumentsAndTheirPackingAreWhatIsTrained checks them.
  kCheckedApart,
};

struct KeyCase {
  std::string value;  // YAML of a value other than the bases'
  Effect effect;
};

// Every key of every section, as the parser reads it.
const std::map<std::string, KeyCase>& Cases() {
  static const std::map<std::string, KeyCase> cases = {
      {"model.kind", {"", Effect::kKind}},
      {"model.block_size", {"16", Effect::kTrained}},
      {"model.n_layer", {"3", Effect::kTrained}},
      {"model.n_head", {"4", Effect::kTrained}},
      {"model.n_embd", {"64", Effect::kTrained}},
      {"model.vocab_size", {"300", Effect::kTrained}},
      {"model.dropout", {"0.2", Effect::kTrained}},
      {"model.bias", {"false", Effect::kTrained}},
      {"model.kernels", {"explicit", Effect::kNotTrained}},
      {"model.hidden", {"48", Effect::kTrained}},
      {"model.layers", {"3", Effect::kTrained}},
      {"model.batch_norm", {"true", Effect::kTrained}},
      {"model.path", {"other.pt", Effect::kContent}},
      {"model.library", {"libother.so", Effect::kContent}},
      {"model.name", {"other_model", Effect::kTrained}},
      {"model.options", {"{width: 64}", Effect::kTrained}},
      {"model.blocks", {"layers", Effect::kTrained}},
      {"model.embed", {"embedding", Effect::kTrained}},
      {"model.head", {"output", Effect::kTrained}},
      {"model.inputs", {"byte_histogram", Effect::kTrained}},
      {"model.loss", {"mse", Effect::kTrained}},
      {"model.ignore_index", {"-1", Effect::kTrained}},
      {"model.flops_per_sample", {"1e9", Effect::kNotTrained}},
      {"data.format", {"", Effect::kKind}},
      {"data.files", {"[/usr/share/common-licenses/GPL-2]", Effect::kContent}},
      {"data.holdout_fraction", {"0.2", Effect::kTrained}},
      {"data.eval_windows_per_slice", {"8", Effect::kNotTrained}},
      {"data.train", {"other.bin", Effect::kContent}},
      {"data.eval", {"[other_eval.bin]", Effect::kContent}},
      {"data.dtype", {"uint32", Effect::kTrained}},
      {"data.loss_masks", {"true", Effect::kTrained}},
      {"data.document_end", {"999", Effect::kCheckedApart}},
      {"data.packing", {"false", Effect::kCheckedApart}},
      {"data.inputs", {"features", Effect::kTrained}},
      {"data.targets", {"labels", Effect::kTrained}},
      {"optimizer.kind", {"", Effect::kOnlyValue}},
      {"optimizer.lr", {"0.002", Effect::kTrained}},
      {"optimizer.beta1", {"0.8", Effect::kTrained}},
      {"optimizer.beta2", {"0.9", Effect::kTrained}},
      {"optimizer.weight_decay", {"0.05", Effect::kTrained}},
      {"optimizer.eps", {"1e-6", Effect::kTrained}},
      {"schedule.warmup_updates", {"5", Effect::kTrained}},
      {"schedule.min_lr", {"1e-5", Effect::kTrained}},
      {"training.effective_batch", {"16", Effect::kTrained}},
      {"training.updates", {"30", Effect::kTrained}},
      {"training.grad_clip", {"0.5", Effect::kTrained}},
      {"training.seed", {"8", Effect::kTrained}},
      {"training.eval_interval", {"7", Effect::kNotTrained}},
      {"training.checkpoint_interval", {"7", Effect::kNotTrained}},
      {"training.allow_batch_norm_accumulation", {"true", Effect::kNotTrained}},
      {"plan.microbatch", {"1", Effect::kNotTrained}},
      {"plan.accumulation_steps", {"2", Effect::kNotTrained}},
      {"plan.checkpoint_blocks", {"[0]", Effect::kNotTrained}},
      {"plan.precision", {"bf16", Effect::kNotTrained}},
      {"plan.optimizer_state", {"host", Effect::kNotTrained}},
      {"plan.zero_stage", {"1", Effect::kNotTrained}},
      {"plan.output_chunk", {"64", Effect::kNotTrained}},
      {"plan.step_in_backward", {"true", Effect::kCheckedApart}},
      {"plan.offload_activations", {"true", Effect::kCheckedApart}},
      {"runtime.threads", {"2", Effect::kNotTrained}},
      {"runtime.device", {"cuda", Effect::kNotTrained}},
      {"runtime.fix_blas_core", {"false", Effect::kNotTrained}},
      {"distributed.ranks", {"1", Effect::kNotTrained}},
      {"distributed.launcher", {"slurm", Effect::kNotTrained}},
      {"distributed.timeout", {"10m", Effect::kNotTrained}},
      {"distributed.launcher_path", {"/opt/bin/torchrun", Effect::kNotTrained}},
      {"distributed.launcher_args", {"[--nnodes=2]", Effect::kNotTrained}},
      {"memory.budget", {"1GiB", Effect::kNotTrained}},
      {"memory.reserve", {"20%", Effect::kNotTrained}},
      {"memory.host_budget", {"8GiB", Effect::kNotTrained}},
      {"memory.simulated_device", {"true", Effect::kNotTrained}},
      {"planner.precisions", {"[fp32]", Effect::kNotTrained}},
      {"planner.probe_microbatches", {"[1, 8]", Effect::kNotTrained}},
      {"planner.optimizer_states", {"[device]", Effect::kNotTrained}},
      {"planner.zero_stages", {"[0]", Effect::kNotTrained}},
      {"finetune.method", {"", Effect::kCheckedApart}},
      {"finetune.rank", {"8", Effect::kTrained}},
      {"finetune.alpha", {"4", Effect::kTrained}},
      {"finetune.dropout", {"0.1", Effect::kTrained}},
      {"finetune.base_dtype", {"bf16", Effect::kTrained}},
      {"finetune.targets", {"[proj]", Effect::kTrained}},
      {"window", {"2h", Effect::kNotTrained}},
      {"init_from", {"/srv/weights/model.safetensors", Effect::kContent}},
  };
  return cases;
}

// A job of each model kind and data format, every section present.
const std::vector<std::string>& Bases() {
  static const std::vector<std::string> bases = [] {
    const std::string rest =
        "optimizer: {lr: 0.003}\n"
        "schedule: {warmup_updates: 3, min_lr: 0.0003}\n"
        "training: {effective_batch: 8, updates: 20, seed: 7}\n"
        "plan: {microbatch: 2, checkpoint_blocks: none}\n"
        "runtime: {threads: 1}\n"
        "distributed: {ranks: 2, launcher: torchrun}\n"
        "memory: {budget: 64MiB}\n"
        "planner: {precisions: [fp32, bf16]}\n"
        "finetune: {method: lora, rank: 4, alpha: 8, dropout: 0, targets: [qkv]}\n";
    const std::string text = "data: {format: text, files: [/usr/share/common-licenses/GPL-3]}\n";
    const std::string own = "ignore_index: -100, flops_per_sample: 1e8";
    return std::vector<std::string>{
        "model: {kind: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}\n" + text + rest,
        "model: {kind: mlp, hidden: 16, layers: 2, block_size: 32}\n" + text + rest,
        "model: {kind: torchscript, path: lm.pt, blocks: blocks, " + own +
            "}\n"
            "data: {format: tokens, train: train.bin, eval: [eval.bin]}\n" +
            rest,
        "model: {kind: plugin, library: libmodel.so, " + own +
            "}\n"
            "data: {format: tensors, train: train.safetensors, eval: [eval.safetensors]}\n" +
            rest,
    };
  }();
  return bases;
}

Result<JobSpec> Parse(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  return ParseJobSpecText(out.c_str(), "/jobs/job.yaml");
}

// The node at `section` ("" for the top level), created as a mapping where missing.
YAML::Node At(YAML::Node root, const std::string& section) {
  if (section.empty()) return root;
  return root[section];
}

// The keys the parser reads at `section`, from its unknown-key error.
std::vector<std::string> KnownKeys(const YAML::Node& base, const std::string& section) {
  YAML::Node root = YAML::Clone(base);
  At(root, section)["zz_not_a_key"] = 1;
  const Result<JobSpec> refused = Parse(root);
  const std::string marker = "known keys here: ";
  const std::string message = refused.ok() ? "" : refused.status().message();
  const std::size_t start = message.find(marker);
  if (start == std::string::npos) {
    ADD_FAILURE() << section << ": no unknown-key error listing the known keys: " << message;
    return {};
  }
  const std::string list =
      message.substr(start + marker.size(), message.find(')', start) - start - marker.size());
  std::vector<std::string> keys;
  for (std::size_t from = 0; from <= list.size();) {
    const std::size_t comma = list.find(", ", from);
    keys.push_back(list.substr(from, comma == std::string::npos ? comma : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 2;
  }
  return keys;
}

std::string IdentityOf(const YAML::Node& root, const std::string& what) {
  const Result<JobSpec> spec = Parse(root);
  EXPECT_TRUE(spec.ok()) << what << ": " << spec.status().message();
  return spec.ok() ? JobIdentity(*spec, "data-fingerprint") : "";
}

bool IsSection(const std::string& path) {
  const auto next = Cases().lower_bound(path + ".");
  return next != Cases().end() && next->first.starts_with(path + ".");
}

TEST(JobIdentityTest, EveryKeyThatChangesWhatIsTrainedChangesItAndNoOtherKeyDoes) {
  std::set<std::string> walked;
  for (const std::string& text : Bases()) {
    const YAML::Node base = YAML::Load(text);
    const std::string identity = IdentityOf(base, "the base job");
    std::vector<std::string> sections = {""};
    for (std::size_t s = 0; s < sections.size(); ++s) {
      const std::string section = sections[s];
      for (const std::string& key : KnownKeys(base, section)) {
        const std::string path = section.empty() ? key : section + "." + key;
        if (IsSection(path)) {
          sections.push_back(path);
          continue;
        }
        const auto found = Cases().find(path);
        if (found == Cases().end()) {
          ADD_FAILURE() << path << " is read by the job-spec parser but not classified here: say "
                        << "whether it changes what is trained (job_identity.cc) and give it a "
                        << "value in Cases()";
          continue;
        }
        walked.insert(path);
        const KeyCase& c = found->second;
        if (c.effect == Effect::kKind || c.effect == Effect::kOnlyValue ||
            c.effect == Effect::kCheckedApart) {
          continue;
        }
        YAML::Node changed = YAML::Clone(base);
        At(changed, section)[key] = YAML::Load(c.value);
        const std::string what =
            "base " + base["model"]["kind"].as<std::string>() + ", " + path + ": " + c.value;
        const std::string other = IdentityOf(changed, what);
        if (c.effect == Effect::kTrained) {
          EXPECT_NE(other, identity) << what << " changes what is trained, not the identity";
        } else {
          EXPECT_EQ(other, identity) << what << " changed the identity";
        }
      }
    }
  }
  for (const auto& [path, c] : Cases()) {
    EXPECT_TRUE(walked.contains(path)) << path << " is classified but no parser reads it";
  }
}

TEST(JobIdentityTest, EachModelKindAndDataFormatIsItsOwnJob) {
  std::set<std::string> identities;
  for (const std::string& text : Bases()) identities.insert(IdentityOf(YAML::Load(text), text));
  EXPECT_EQ(identities.size(), Bases().size());
}

TEST(JobIdentityTest, AnAdapterJobIsNotTheFullJob) {
  YAML::Node full = YAML::Load(Bases()[0]);
  const std::string adapted = IdentityOf(full, "the base job");
  full["finetune"] = YAML::Load("{method: full}");
  EXPECT_NE(IdentityOf(full, "full training"), adapted);
}

TEST(JobIdentityTest, DocumentsAndTheirPackingAreWhatIsTrained) {
  YAML::Node job = YAML::Load(Bases()[0]);  // a GPT: it keeps packed documents apart
  job["data"] = YAML::Load("{format: tokens, train: train.bin, eval: [eval.bin]}");
  const std::string stream = IdentityOf(job, "one stream of ids");
  job["data"]["document_end"] = 999;
  const std::string packed = IdentityOf(job, "packed documents");
  job["data"]["packing"] = false;
  const std::string padded = IdentityOf(job, "one document per window");
  EXPECT_NE(packed, stream);
  EXPECT_NE(padded, stream);
  EXPECT_NE(padded, packed);
}

TEST(JobIdentityTest, TheStepInsideTheBackwardIsAPlan) {
  YAML::Node job = YAML::Load(Bases()[0]);
  job.remove("distributed");
  job["plan"] = YAML::Load("{microbatch: 8}");
  const std::string plain = IdentityOf(job, "one microbatch per update");
  job["plan"]["step_in_backward"] = true;
  EXPECT_EQ(IdentityOf(job, "stepped inside the backward"), plain);
}

TEST(JobIdentityTest, TheActivationsOnTheHostAreAPlan) {
  YAML::Node job = YAML::Load(Bases()[0]);
  job["memory"]["simulated_device"] = true;
  const std::string plain = IdentityOf(job, "activations on the device");
  job["plan"]["offload_activations"] = true;
  EXPECT_EQ(IdentityOf(job, "activations on the host"), plain);
}

// The files' paths stay out; what they hold joins: the data's fingerprint, the model file's
// and the initial weights' hashes.
TEST(JobIdentityTest, TheContentOfEveryFileJoinsTheIdentity) {
  Result<JobSpec> spec = Parse(YAML::Load(Bases()[2]));
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  spec->model.loaded = LoadedModel{};
  spec->model.loaded->file_sha256 = "aa";
  const std::string identity = JobIdentity(*spec, "data-fingerprint");
  EXPECT_NE(JobIdentity(*spec, "other-data"), identity);
  JobSpec other_model = *spec;
  other_model.model.loaded->file_sha256 = "bb";
  EXPECT_NE(JobIdentity(other_model, "data-fingerprint"), identity);
  JobSpec other_weights = *spec;
  other_weights.init_from.sha256 = "cc";
  EXPECT_NE(JobIdentity(other_weights, "data-fingerprint"), identity);
}

}  // namespace
}  // namespace trainerd
