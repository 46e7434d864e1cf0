#include "trainerd/trainer/plan/memory_ledger.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <utility>

#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/device/device_timer.h"
#include "trainerd/trainer/distributed/state_sharding.h"
#include "trainerd/trainer/loop/gradient_accumulation.h"
#include "trainerd/trainer/loop/host_model_state.h"
#include "trainerd/trainer/loop/model_state_bytes.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/models/build_model.h"
#include "trainerd/trainer/semantics/activation_offload.h"
#include "trainerd/trainer/semantics/sample_dropout.h"
#include "trainerd/trainer/spec/units.h"

namespace trainerd {
namespace {

// Live bytes each block leaves behind in one forward and loss of `batch` with `checkpointed`
// blocks (the others keeping their activations on the device, whatever the plan), and its time;
// then (at index num_blocks()) the output layer's and its loss's, zero for a model without one. In
// the batch's sample stream as training runs it: dropout there keeps no mask on the CPU
// (sample_dropout.h), where outside a stream torch::dropout would.
std::vector<std::pair<std::int64_t, double>> MeasureBlocks(Trainer& trainer, DeviceMemory& memory,
                                                           const Batch& batch,
                                                           const std::vector<int>& checkpointed,
                                                           Precision precision) {
  TrainableModel& model = trainer.model();
  std::vector<std::pair<std::int64_t, double>> per_block(
      static_cast<std::size_t>(model.num_blocks()) + 1);
  std::int64_t live_before = 0;
  DeviceTimer timer(trainer.device());
  model.set_checkpointed_blocks(checkpointed);
  const bool offloaded = model.offload_activations();
  model.set_offload_activations(false);
  model.set_block_observer([&](int index, bool after) {
    if (!after) {
      live_before = memory.live_bytes();
      timer.Restart();
      return;
    }
    per_block[static_cast<std::size_t>(index)] = {memory.live_bytes() - live_before,
                                                  timer.Seconds()};
  });
  {
    const SampleStreamScope stream(batch.stream);
    const LossTerms terms = ForwardLossWithPrecision(model, batch, precision);
  }
  model.set_block_observer({});
  model.set_offload_activations(offloaded);
  return per_block;
}

// The host's rows: what a plan with the optimizer state on the host keeps there.
std::string HostTable(const HostLedger& host) {
  std::string out = host.in_device_count
                        ? "\non the host (on the CPU the host is the device: in the peak above "
                          "and against the budget)\n"
                        : "\non the host (outside the device budget)\n";
  char line[160];
  for (const auto& [name, bytes] :
       {std::pair<const char*, std::int64_t>{"master weights", host.master_weights_bytes},
        {"gradients", host.gradients_bytes},
        {"optimizer state", host.optimizer_state_bytes},
        {"activations", host.activations_bytes},
        {"peak", host.peak_bytes}}) {
    if (bytes == 0 && std::string_view(name) != "peak") continue;
    std::snprintf(line, sizeof(line), "%-18s %12s\n", name, FormatBytes(bytes).c_str());
    out += line;
  }
  if (host.budget_bytes == 0) return out;  // a ledger on paper knows no host
  std::snprintf(line, sizeof(line), "%-18s %12s %s\n", "host budget",
                FormatBytes(host.budget_bytes).c_str(),
                host.peak_bytes <= host.budget_bytes ? "(fits)" : "(DOES NOT FIT)");
  return out + line;
}

// One rank's part of a ledger measured on one process holding all of the model's state, for
// a plan that shards it over spec.distributed.job_ranks (state_sharding.h): the largest
// shard's optimizer state (and, stage 2, gradients), the peaks less the state it does not keep.
void ShardLedger(const JobSpec& spec, const torch::nn::Module& model, MemoryLedger* ledger) {
  const int ranks = spec.distributed.job_ranks;
  const std::int64_t state_not_kept = OptimizerStateOnOtherRanks(TrainableParameters(model), ranks);
  ledger->sharded_over_ranks = ranks;
  ledger->optimizer_state_on_other_ranks = state_not_kept;
  ledger->optimizer_state_bytes -= state_not_kept;
  if (spec.plan.zero_stage == 2) {
    const std::int64_t other_gradients =
        BytesOutsideLargestShard(TrainableParameters(model), ranks);
    ledger->gradients_bytes -= other_gradients;
    ledger->temporaries_bytes += other_gradients;
  }
  ledger->evaluation_peak_bytes -= state_not_kept;
  ledger->peak_bytes -= state_not_kept;
  ledger->reserved_peak_bytes -= state_not_kept;
}

}  // namespace

Result<MemoryLedger> MeasureLedger(const JobSpec& spec, const Dataset& corpus,
                                   TrainingFault fault) {
  MemoryLedger ledger;
  ledger.plan = spec.plan;
  ledger.budget_bytes = spec.memory.budget_bytes;
  ledger.usable_bytes = spec.memory.usable_bytes();
  const OutOfMemoryWatch out_of_memory;
  try {
    NullEventSink discard;
    Trainer trainer(spec, corpus, &discard);
    DeviceMemory& memory = MemoryOf(trainer.device());
    ledger.method = memory.method();
    ScopedMemoryLimit lifted(memory, 0);

    trainer.set_test_only_fault(fault);
    // AdamW's state exists from the first update that steps (an fp16 one may be skipped).
    const std::optional<int> measured = trainer.TrainUntilStepped(0);
    if (!measured) {
      return Status::FailedPrecondition(
          "measuring the ledger: the fp16 loss scaler skipped every update it tried: the "
          "gradients overflow at every scale");
    }
    for (const auto& p : trainer.model().parameters()) {
      ledger.parameters_bytes += TensorBytes(p);
      if (!p.requires_grad()) ledger.frozen_parameters_bytes += TensorBytes(p);
    }
    MemorySnapshot state;
    trainer.model_state().Count(&state);
    ledger.gradients_bytes = state.gradients_bytes;
    ledger.optimizer_state_bytes = state.optimizer_state_bytes;  // on the device
    ledger.host = trainer.model_state().HostBytes(spec.memory);
    if (!ledger.host && spec.plan.offload_activations) {
      ledger.host = HostLedger{};
      ledger.host->budget_bytes = HostBudgetBytes(spec.memory);
    }
    if (ledger.host) ledger.host->in_device_count = HostIsTheDevice(spec);
    for (const Batch& b : trainer.Microbatches(*measured)) {
      ledger.inputs_bytes += TensorBytes(b.inputs) + TensorBytes(b.targets);
      // Documents' positions stay on the CPU: inputs on the CPU device, beside another one.
      if (b.positions.defined() && b.positions.device() == b.inputs.device()) {
        ledger.inputs_bytes += TensorBytes(b.positions);
      }
    }

    const std::int64_t live_at_start = memory.live_bytes();
    const std::int64_t offloaded_at_start = OffloadedActivationBytes();
    HostMemory& host_memory = HostMemoryOfProcess();
    memory.ResetPeak();
    host_memory.ResetPeak();
    trainer.TrainUpdate(*measured, [&](std::size_t index) {
      if (index != 0) return;
      ledger.activations_bytes = memory.live_bytes() - live_at_start - ledger.inputs_bytes;
      if (ledger.host) {
        ledger.host->activations_bytes = OffloadedActivationBytes() - offloaded_at_start;
      }
    });
    if (ledger.host) {
      // Pinned memory (CUDA's host copies) is outside the CPU allocator's count.
      ledger.host->peak_bytes = host_memory.peak_bytes() +
                                (trainer.device().is_cuda() ? ledger.host->activations_bytes : 0);
    }
    const std::int64_t update_peak = memory.peak_bytes();
    const std::int64_t reserved_peak = memory.peak_reserved_bytes();
    const std::int64_t host_in_peak =
        ledger.host && ledger.host->in_device_count ? ledger.host->peak_bytes : 0;
    const Batch batch = trainer.Microbatches(*measured).front();
    std::vector<int> all(static_cast<std::size_t>(trainer.model().num_blocks()));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    const auto plain = MeasureBlocks(trainer, memory, batch, {}, spec.plan.precision);
    const auto checkpointed = MeasureBlocks(trainer, memory, batch, all, spec.plan.precision);
    for (std::size_t i = 0; i < all.size(); ++i) {
      ledger.blocks.push_back(
          {static_cast<int>(i), plain[i].first, checkpointed[i].first, plain[i].second});
    }
    // The output layer's share of what the first microbatch's forward kept: its own category.
    ledger.output_layer_bytes = std::min(plain.back().first, ledger.activations_bytes);
    ledger.activations_bytes -= ledger.output_layer_bytes;
    ledger.temporaries_bytes = std::max<std::int64_t>(
        0, update_peak - ledger.parameters_bytes - ledger.gradients_bytes -
               ledger.optimizer_state_bytes - ledger.inputs_bytes - ledger.activations_bytes -
               ledger.output_layer_bytes - host_in_peak);
    // The evaluation runs between updates, beside the model's whole state.
    memory.ResetPeak();
    trainer.Evaluate();
    ledger.evaluation_peak_bytes = memory.peak_bytes();
    ledger.peak_bytes = std::max(update_peak, ledger.evaluation_peak_bytes);
    ledger.reserved_peak_bytes = std::max(reserved_peak, memory.peak_reserved_bytes());
    ledger.blocks_note = trainer.model().blocks_note();
    if (spec.plan.zero_stage > 0 && spec.distributed.job_ranks > 1) {
      ShardLedger(spec, trainer.model(), &ledger);
    }
  } catch (const std::exception& e) {
    return out_of_memory.StatusOf(e, "measuring the ledger: " + ModelErrorReason(e));
  }
  return ledger;
}

int OutputChunkFor(const MemoryLedger& ledger, int positions_per_sample) {
  std::int64_t largest_block = 0;
  for (const BlockActivation& b : ledger.blocks) {
    largest_block = std::max(largest_block, b.activation_bytes);
  }
  if (ledger.output_layer_bytes <= largest_block) return 0;
  const double samples = ledger.plan.microbatch;
  const double per_position = static_cast<double>(ledger.output_layer_bytes) /
                              (samples * std::max(1, positions_per_sample));
  const double block_per_sample = static_cast<double>(largest_block) / samples;
  int chunk = 1;
  while (chunk < positions_per_sample && 2 * chunk * per_position <= block_per_sample) chunk *= 2;
  return chunk;
}

std::string LedgerTable(const MemoryLedger& ledger) {
  std::vector<std::pair<std::string, std::int64_t>> rows = {
      {"parameters", ledger.parameters_bytes},           {"gradients", ledger.gradients_bytes},
      {"optimizer state", ledger.optimizer_state_bytes}, {"activations", ledger.activations_bytes},
      {"temporaries", ledger.temporaries_bytes},         {"inputs", ledger.inputs_bytes}};
  if (ledger.output_layer_bytes > 0 || ledger.plan.output_chunk > 0) {
    rows.emplace_back("output layer", ledger.output_layer_bytes);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  char line[160];
  std::snprintf(line, sizeof(line), "%-18s %12s %7s\n", "category", "size", "share");
  out += line;
  for (const auto& [name, bytes] : rows) {
    std::snprintf(line, sizeof(line), "%-18s %12s %6.1f%%\n", name.c_str(),
                  FormatBytes(bytes).c_str(),
                  ledger.peak_bytes > 0
                      ? 100.0 * static_cast<double>(bytes) / static_cast<double>(ledger.peak_bytes)
                      : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof(line), "%-18s %12s\n%-18s %12s %s\n%-18s %12s\n", "peak",
                FormatBytes(ledger.peak_bytes).c_str(), "usable",
                FormatBytes(ledger.usable_bytes).c_str(),
                ledger.peak_bytes <= ledger.usable_bytes ? "(fits)" : "(DOES NOT FIT)", "budget",
                FormatBytes(ledger.budget_bytes).c_str());
  out += line;
  std::snprintf(line, sizeof(line), "%-18s %12s (in the peak when it is the higher)\n",
                "evaluation peak", FormatBytes(ledger.evaluation_peak_bytes).c_str());
  out += line;
  if (ledger.plan.output_chunk > 0) {
    out += "output layer: its loss in chunks of " + std::to_string(ledger.plan.output_chunk) +
           " positions (plan output_chunk), never the whole logits\n";
  }
  if (ledger.plan.step_in_backward) {
    out +=
        "gradients: the optimizer step inside the backward (plan step_in_backward) steps and "
        "frees each parameter's as soon as it is complete: never all alive at once\n";
  }
  if (ledger.plan.offload_activations) {
    out +=
        "activations: the blocks not checkpointed keep what their forward saves in host memory "
        "(plan offload_activations), copied back as the backward needs it\n";
  }
  if (ledger.host) out += HostTable(*ledger.host);
  if (ledger.frozen_parameters_bytes > 0) {
    out += "parameters: " + FormatBytes(ledger.frozen_parameters_bytes) +
           " of them frozen (adapters train the rest): no gradients, no optimizer state\n";
  }
  if (ledger.sharded_over_ranks > 1) {
    out += std::string(ledger.plan.zero_stage == 2 ? "gradients and optimizer state"
                                                   : "optimizer state") +
           ": the largest of " + std::to_string(ledger.sharded_over_ranks) +
           " ranks' shards (ZeRO stage " + std::to_string(ledger.plan.zero_stage) + ")\n";
  }
  if (ledger.reserved_peak_bytes != ledger.peak_bytes) {  // a caching allocator (CUDA) holds more
    std::snprintf(line, sizeof(line), "%-18s %12s\n", "reserved peak",
                  FormatBytes(ledger.reserved_peak_bytes).c_str());
    out += line;
  }
  if (!ledger.blocks_note.empty()) return out + "\n" + ledger.blocks_note + "\n";
  // A ledger on paper (models/paper_ledger.h) has no forward time.
  const bool timed = std::any_of(ledger.blocks.begin(), ledger.blocks.end(),
                                 [](const BlockActivation& b) { return b.forward_seconds > 0; });
  std::snprintf(line, sizeof(line), "\n%-6s %14s %14s", "block", "activations", "checkpointed");
  out += line + std::string(timed ? "      forward\n" : "\n");
  for (const BlockActivation& b : ledger.blocks) {
    std::snprintf(line, sizeof(line), "%-6d %14s %14s", b.index,
                  FormatBytes(b.activation_bytes).c_str(),
                  FormatBytes(b.checkpointed_activation_bytes).c_str());
    out += line;
    if (timed) {
      std::snprintf(line, sizeof(line), " %11.1fms", b.forward_seconds * 1e3);
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace trainerd
