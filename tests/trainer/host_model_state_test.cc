// The optimizer state on the host (host_model_state.h, StatePlacement::kHost): host memory
// counted apart from the device's and outside its limit; training equal to the device
// placement's bit for bit in every precision, and across a checkpoint written by the other
// placement; the ledger's device/host split; the planner choosing the lever when the model's
// state leaves no plan room on the device, the plan's parity passing and its weights equal to
// an unconstrained run's; and the parity check rejecting a host step whose weights never come
// back to the device.
#include "trainerd/trainer/loop/host_model_state.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <string>
#include <variant>
#include <vector>

#include "../support/cuda_test.h"
#include "../support/stop_after_update.h"
#include "../support/temp_dir.h"
#include "../support/tiny_job_test.h"
#include "trainerd/trainer/device/device_memory.h"
#include "trainerd/trainer/loop/trainer.h"
#include "trainerd/trainer/plan/memory_ledger.h"
#include "trainerd/trainer/plan/parity.h"
#include "trainerd/trainer/plan/planner.h"
#include "trainerd/trainer/spec/plan_text.h"

namespace trainerd {
namespace {

class HostModelStateTest : public testing::TinyJobTest {
 protected:
  // The CPU simulating an accelerator, as the tests of a lever that moves state off one
  // must (on the CPU the host is the device: OnTheCpuTheHostIsTheDevice...).
  JobSpec With(StatePlacement placement) const {
    JobSpec spec = spec_;
    spec.plan.optimizer_state = placement;
    spec.memory.simulated_device = true;
    return spec;
  }
  static std::vector<torch::Tensor> Parameters(Trainer& trainer) {
    std::vector<torch::Tensor> out;
    for (const torch::Tensor& p : trainer.model().parameters()) out.push_back(p.detach().clone());
    return out;
  }
  // The parameters after `updates` updates of `spec`.
  std::vector<torch::Tensor> Trained(const JobSpec& spec, int updates) {
    NullEventSink discard;
    Trainer trainer(spec, *corpus_, &discard);
    for (int update = 0; update < updates; ++update) trainer.TrainUpdate(update);
    return Parameters(trainer);
  }
  static double LargestDifference(const std::vector<torch::Tensor>& a,
                                  const std::vector<torch::Tensor>& b) {
    EXPECT_EQ(a.size(), b.size());
    double largest = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      largest = std::max(largest, (a[i] - b[i]).abs().max().item<double>());
    }
    return largest;
  }
};

TEST_F(HostModelStateTest, AllocationsInAHostScopeAreHostMemoryOutsideTheDeviceLimit) {
  SetCpuHostApart(true);  // the CPU simulating an accelerator
  DeviceMemory& device = MemoryOf(torch::kCPU);
  HostMemory& host = HostMemoryOfProcess();
  const std::int64_t device_before = device.live_bytes();
  const std::int64_t host_before = host.live_bytes();
  {
    torch::Tensor on_host;
    {
      // The device has room for 1 KiB more; the host tensor is 4 MiB.
      const ScopedMemoryLimit limited(device, device_before + 1024);
      const HostMemoryScope scope;
      on_host = torch::ones({1 << 20});
    }
    EXPECT_EQ(host.live_bytes() - host_before, 4 << 20);
    EXPECT_EQ(device.live_bytes(), device_before);
    const torch::Tensor on_device = torch::ones({1024});
    EXPECT_EQ(device.live_bytes() - device_before, 4096);
    EXPECT_EQ(host.live_bytes() - host_before, 4 << 20);
  }
  // Freed outside the scope, each from the count it was allocated in.
  EXPECT_EQ(host.live_bytes(), host_before);
  EXPECT_EQ(device.live_bytes(), device_before);
}

// Issue 46: on the CPU the host is the device. Unless the CPU simulates an accelerator, memory
// in a host scope is the device's too, against its limit.
TEST_F(HostModelStateTest, OnTheCpuHostMemoryIsTheDevicesUnlessItSimulatesAnAccelerator) {
  SetCpuHostApart(false);
  DeviceMemory& device = MemoryOf(torch::kCPU);
  HostMemory& host = HostMemoryOfProcess();
  const std::int64_t device_before = device.live_bytes();
  const std::int64_t host_before = host.live_bytes();
  {
    const HostMemoryScope scope;
    const torch::Tensor on_host = torch::ones({1 << 20});
    EXPECT_EQ(host.live_bytes() - host_before, 4 << 20);
    EXPECT_EQ(device.live_bytes() - device_before, 4 << 20);
    const ScopedMemoryLimit limited(device, device.live_bytes() + 1024);
    EXPECT_THROW(torch::ones({1 << 20}), c10::OutOfMemoryError);
  }
  EXPECT_EQ(host.live_bytes(), host_before);
  EXPECT_EQ(device.live_bytes(), device_before);
  SetCpuHostApart(true);
}

// The job's own ledger on the CPU counts the state on the host in the device's peak: the
// lever frees nothing there, and the ledger says so.
TEST_F(HostModelStateTest, OnTheCpuTheLedgerCountsTheHostStateInTheDevicesPeak) {
  JobSpec on_cpu = With(StatePlacement::kHost);
  on_cpu.memory.simulated_device = false;
  const Result<MemoryLedger> device = MeasureLedger(With(StatePlacement::kDevice), *corpus_);
  const Result<MemoryLedger> simulated = MeasureLedger(With(StatePlacement::kHost), *corpus_);
  const Result<MemoryLedger> host = MeasureLedger(on_cpu, *corpus_);
  ASSERT_TRUE(device.ok() && simulated.ok() && host.ok());
  ASSERT_TRUE(host->host && simulated->host);
  EXPECT_TRUE(host->host->in_device_count);
  EXPECT_FALSE(simulated->host->in_device_count);
  // The host's copies are in the device's peak: above the simulated device's by at least the
  // master weights and AdamW's state, and above the state kept on the device.
  EXPECT_GE(host->peak_bytes - simulated->peak_bytes,
            host->host->master_weights_bytes + host->host->optimizer_state_bytes);
  EXPECT_GT(host->peak_bytes, device->peak_bytes);
  // The host's peak is taken out of the temporaries; it may not coincide with the device's,
  // so they differ by at most the host's own transient bytes (its peak less its state).
  const std::int64_t host_transient =
      host->host->peak_bytes - host->host->master_weights_bytes - host->host->optimizer_state_bytes;
  EXPECT_LE(host->temporaries_bytes, simulated->temporaries_bytes);
  EXPECT_GE(host->temporaries_bytes, simulated->temporaries_bytes - host_transient);
  EXPECT_NE(LedgerTable(*host).find("the host is the device"), std::string::npos)
      << LedgerTable(*host);
}

// Clipping at 0.05 is active in every update, dropout draws masks, accumulation and
// checkpointing split the batch: the host step sees the same gradient and takes the same step.
TEST_F(HostModelStateTest, TrainsBitForBitAsWithTheStateOnTheDeviceInEveryPrecision) {
  spec_.model.options["dropout"] = 0.1;
  spec_.training.grad_clip = 0.05;
  for (const Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    spec_.plan = {2, 4, {0, 1}, precision};
    const auto on_device = Trained(With(StatePlacement::kDevice), 4);
    const auto on_host = Trained(With(StatePlacement::kHost), 4);
    EXPECT_EQ(LargestDifference(on_device, on_host), 0.0) << ToString(precision);
    EXPECT_GT(LargestDifference(on_host, Trained(With(StatePlacement::kHost), 0)), 0.0)
        << "the updates must have moved the weights for the comparison to mean anything";
  }
}

// The parity check sets a side's weights before every update: the host's masters follow.
TEST_F(HostModelStateTest, WeightsSetOnTheModelReachTheHostsMastersWhenAdopted) {
  NullEventSink discard;
  Trainer on_device(With(StatePlacement::kDevice), *corpus_, &discard);
  Trainer on_host(With(StatePlacement::kHost), *corpus_, &discard);
  for (Trainer* trainer : {&on_device, &on_host}) {
    {
      const torch::NoGradGuard no_grad;
      for (torch::Tensor& p : trainer->model().parameters()) p.mul_(0.5);
    }
    trainer->model_state().AdoptModelWeights();
    trainer->TrainUpdate(0);
  }
  EXPECT_EQ(LargestDifference(Parameters(on_device), Parameters(on_host)), 0.0);
}

TEST_F(HostModelStateTest, TheLedgerCountsTheStateOnTheHostAndNotOnTheDevice) {
  const Result<MemoryLedger> device = MeasureLedger(With(StatePlacement::kDevice), *corpus_);
  const Result<MemoryLedger> host = MeasureLedger(With(StatePlacement::kHost), *corpus_);
  ASSERT_TRUE(device.ok() && host.ok());
  EXPECT_FALSE(device->host);
  ASSERT_TRUE(host->host);
  EXPECT_EQ(host->optimizer_state_bytes, 0);
  EXPECT_EQ(host->parameters_bytes, device->parameters_bytes);
  EXPECT_EQ(host->gradients_bytes, device->gradients_bytes);
  EXPECT_EQ(host->host->master_weights_bytes, device->parameters_bytes);
  EXPECT_EQ(host->host->gradients_bytes, device->gradients_bytes);
  EXPECT_EQ(host->host->optimizer_state_bytes, device->optimizer_state_bytes);
  EXPECT_GE(host->host->peak_bytes, HostStateBytes(device->parameters_bytes));
  EXPECT_GT(host->host->budget_bytes, 0);
  // The device's peak falls by the optimizer state and nothing else moves.
  EXPECT_NEAR(static_cast<double>(host->peak_bytes),
              static_cast<double>(device->peak_bytes - device->optimizer_state_bytes),
              0.02 * static_cast<double>(device->peak_bytes));
  EXPECT_EQ(host->activations_bytes, device->activations_bytes);
  EXPECT_NE(LedgerTable(*host).find("on the host"), std::string::npos) << LedgerTable(*host);
}

// Resumed under a device limit that holds the job with its state on the host only (the named
// baseline's peak less half its optimizer state): the checkpoint's AdamW state is loaded in
// host memory, never on the device (loaded there, it ran out of memory and was taken for a
// corrupt file).
TEST_F(HostModelStateTest, AJobResumesAcrossPlacementsFromOneCheckpoint) {
  spec_.training.updates = 4;
  spec_.plan = NamedBaselinePlan(spec_);
  const Result<MemoryLedger> ledger = MeasureLedger(With(StatePlacement::kDevice), *corpus_);
  ASSERT_TRUE(ledger.ok());
  const std::int64_t limit = ledger->peak_bytes - ledger->optimizer_state_bytes / 2;
  testing::TempDir dir;
  TrainerOptions options;
  options.checkpoint_path = dir.File("checkpoint.pt");
  options.model_path = dir.File("model.pt");
  std::atomic<bool> stop{false};
  options.stop_requested = &stop;
  {  // two updates on the device, interrupted: a checkpoint with the state on the device
    testing::StopAfterUpdate sink(2, &stop);
    Trainer first(With(StatePlacement::kDevice), *corpus_, &sink);
    Result<TrainOutcome> outcome = first.Run(options);
    ASSERT_TRUE(outcome.ok()) << outcome.status().message();
    ASSERT_EQ(outcome->kind, TrainOutcome::Kind::kInterrupted);
  }
  stop = false;
  options.resume = Resume::kRequired;
  const std::vector<torch::Tensor> uninterrupted = Trained(With(StatePlacement::kDevice), 4);
  NullEventSink discard;
  Trainer resumed(With(StatePlacement::kHost), *corpus_, &discard);
  Result<TrainOutcome> outcome = [&] {
    const ScopedMemoryLimit limited(MemoryOf(torch::kCPU), limit);
    return resumed.Run(options);
  }();
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  ASSERT_EQ(outcome->kind, TrainOutcome::Kind::kFinished);
  EXPECT_EQ(LargestDifference(Parameters(resumed), uninterrupted), 0.0);
}

TEST_F(HostModelStateTest, AHostBudgetBelowTheStateIsRefusedBeforeAnyUpdate) {
  JobSpec spec = With(StatePlacement::kHost);
  spec.memory.host_budget_bytes = 64 << 10;
  testing::TempDir dir;
  TrainerOptions options;
  options.checkpoint_path = dir.File("checkpoint.pt");
  options.model_path = dir.File("model.pt");
  NullEventSink discard;
  Trainer trainer(spec, *corpus_, &discard);
  Result<TrainOutcome> outcome = trainer.Run(options);
  ASSERT_TRUE(outcome.ok()) << outcome.status().message();
  EXPECT_EQ(outcome->kind, TrainOutcome::Kind::kOutOfMemory);
  EXPECT_EQ(outcome->updates_done, 0);
  EXPECT_NE(outcome->message.find("memory.host_budget"), std::string::npos) << outcome->message;
  EXPECT_NE(outcome->message.find("64.00 KiB"), std::string::npos) << outcome->message;
}

// A device whose usable memory is the named baseline's peak less half the optimizer state:
// no plan with the state on the device fits (the baseline needs the least memory of them).
TEST_F(HostModelStateTest, ThePlannerKeepsTheStateOnTheHostWhenNothingElseFits) {
  spec_.memory.simulated_device = true;
  spec_.planner.precisions = {Precision::kFp32};
  spec_.planner.probe_microbatches = {1, 2, 4};
  spec_.training.updates = 6;
  JobSpec baseline = spec_;
  baseline.plan = NamedBaselinePlan(spec_);
  const Result<MemoryLedger> ledger = MeasureLedger(baseline, *corpus_);
  ASSERT_TRUE(ledger.ok());
  spec_.memory.reserve_fraction = 0;
  spec_.memory.budget_bytes = ledger->peak_bytes - ledger->optimizer_state_bytes / 2;

  Result<ChosenPlan> chosen = PlanJob(spec_, *corpus_, {/*parity_checked=*/true});
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  EXPECT_EQ(chosen->plan.optimizer_state, StatePlacement::kHost) << ToJson(*chosen).dump();
  EXPECT_LE(chosen->measured_peak_bytes, spec_.memory.usable_bytes());

  JobSpec planned = spec_;
  planned.plan = chosen->plan;
  const Result<ParityReport> parity = CheckParity(planned, *corpus_, 3);
  ASSERT_TRUE(parity.ok()) << parity.status().message();
  EXPECT_TRUE(parity->pass) << ToJson(*parity).dump();
  EXPECT_TRUE(parity->memory.reference_on_host);

  // Trained under the device limit, and as the same plan trains with no limit and the state
  // on the device.
  DeviceMemory& memory = MemoryOf(torch::kCPU);
  std::vector<torch::Tensor> limited;
  {
    NullEventSink discard;
    Trainer trainer(planned, *corpus_, &discard);
    const ScopedMemoryLimit limit(memory, spec_.memory.usable_bytes());
    memory.ResetPeak();
    for (int update = 0; update < 6; ++update) trainer.TrainUpdate(update);
    EXPECT_LE(memory.peak_bytes(), spec_.memory.usable_bytes());
    limited = Parameters(trainer);
  }
  planned.plan.optimizer_state = StatePlacement::kDevice;
  EXPECT_LE(LargestDifference(limited, Trained(planned, 6)), 1e-6);
}

// The same budget with the CPU as the CPU: no plan keeps the state on the host, and the
// planner says why it did not try.
TEST_F(HostModelStateTest, OnTheCpuThePlannerDoesNotTryTheHost) {
  spec_.planner.precisions = {Precision::kFp32};
  spec_.training.updates = 6;
  JobSpec baseline = With(StatePlacement::kDevice);
  baseline.plan = NamedBaselinePlan(spec_);
  const Result<MemoryLedger> ledger = MeasureLedger(baseline, *corpus_);
  ASSERT_TRUE(ledger.ok());
  spec_.memory.reserve_fraction = 0;
  spec_.memory.budget_bytes = ledger->peak_bytes - ledger->optimizer_state_bytes / 2;
  ASSERT_TRUE(HostIsTheDevice(spec_));

  Result<ChosenPlan> chosen = PlanJob(spec_, *corpus_);
  ASSERT_FALSE(chosen.ok()) << ToJson(*chosen).dump();
  EXPECT_EQ(chosen.status().code(), Status::Code::kOutOfMemory);
  EXPECT_NE(chosen.status().message().find("on the CPU the host is the device"), std::string::npos)
      << chosen.status().message();

  spec_.memory.budget_bytes = 2 * ledger->peak_bytes;  // room: a plan, and its card says why
  chosen = PlanJob(spec_, *corpus_);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  EXPECT_EQ(chosen->plan.optimizer_state, StatePlacement::kDevice);
  EXPECT_FALSE(chosen->simulated_device);
  EXPECT_NE(PlanText(*chosen).find("memory: on the CPU the host is the device"), std::string::npos)
      << PlanText(*chosen);
}

TEST_F(HostModelStateTest, ParityRejectsAHostStepWhoseWeightsNeverReachTheDevice) {
  spec_.plan = {2, 4, {}, Precision::kFp32, StatePlacement::kHost};
  spec_.memory.simulated_device = true;
  const Result<ParityReport> correct = CheckParity(spec_, *corpus_, 2);
  ASSERT_TRUE(correct.ok()) << correct.status().message();
  ASSERT_TRUE(correct->pass) << ToJson(*correct).dump();
  const Result<ParityReport> stale =
      CheckParity(spec_, *corpus_, 2, TrainingFault::kStaleHostWeights);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  EXPECT_FALSE(stale->pass) << ToJson(*stale).dump();
}

class HostModelStateCudaTest : public testing::CudaTestOf<HostModelStateTest> {};

// On a GPU the step runs on the CPU, the forward and backward on the device: the same update
// to the rounding of the two AdamW kernels, and the device's peak without the state.
TEST_F(HostModelStateCudaTest, TrainsOnTheGpuAsWithTheStateOnTheDeviceWithoutItsBytes) {
  spec_.runtime.device = "cuda";
  spec_.plan = {2, 4, {}, Precision::kFp32};
  EXPECT_LE(LargestDifference(Trained(With(StatePlacement::kDevice), 4),
                              Trained(With(StatePlacement::kHost), 4)),
            1e-6);
  const Result<MemoryLedger> device = MeasureLedger(With(StatePlacement::kDevice), *corpus_);
  const Result<MemoryLedger> host = MeasureLedger(With(StatePlacement::kHost), *corpus_);
  ASSERT_TRUE(device.ok() && host.ok());
  ASSERT_TRUE(host->host);
  EXPECT_EQ(host->optimizer_state_bytes, 0);
  EXPECT_EQ(host->host->optimizer_state_bytes, device->optimizer_state_bytes);
  EXPECT_LT(host->peak_bytes, device->peak_bytes - device->optimizer_state_bytes / 2);
}

}  // namespace
}  // namespace trainerd
