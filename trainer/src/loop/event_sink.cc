#include "trainerd/trainer/loop/event_sink.h"

#include <algorithm>
#include <string>

#include "trainerd/trainer/spec/units.h"

namespace trainerd {

void JsonLinesSink::Emit(const WorkerEvent& event) {
  const std::string line = ToJson(event).dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void TerminalProgress::Emit(const WorkerEvent& event) {
  std::visit([this](const auto& e) { Print(e); }, event);
  std::fflush(out_);
}

void TerminalProgress::EndBar() {
  if (bar_open_) std::fputc('\n', out_);
  bar_open_ = false;
}

void TerminalProgress::Print(const StartEvent& e) {
  std::fprintf(out_, "trainer-run: %s model, %lld parameters, %d updates of %d samples\n",
               e.model.kind.c_str(), static_cast<long long>(e.model.parameters), e.updates,
               e.effective_batch);
  std::string checkpointed = "none";
  if (!e.plan.checkpoint_blocks.empty()) {
    checkpointed = nlohmann::json(e.plan.checkpoint_blocks).dump();
  }
  std::fprintf(out_,
               "  plan: microbatch %d x %d accumulation steps, checkpointed blocks %s, %s; "
               "%d threads on %s\n",
               e.plan.microbatch, e.plan.accumulation_steps, checkpointed.c_str(),
               ToString(e.plan.precision), e.threads, e.device.c_str());
  std::fprintf(out_, "  data: %zu slices, fingerprint %.12s\n", e.data.slices.size(),
               e.data.fingerprint.c_str());
  if (e.resumed_from_update > 0) {
    std::fprintf(out_, "  resumed from update %d\n", e.resumed_from_update);
  }
}

void TerminalProgress::Print(const UpdateEvent& e) {
  constexpr int kWidth = 30;
  const int filled =
      static_cast<int>(static_cast<long long>(kWidth) * e.update / std::max(1, e.updates));
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(out_, "\r[%s] %d/%d loss %.4f  %.1f samples/s  ETA %s   ", bar.c_str(), e.update,
               e.updates, e.loss, e.samples_per_second, FormatDuration(e.eta_seconds).c_str());
  bar_open_ = true;
}

void TerminalProgress::Print(const EvalEvent& e) {
  EndBar();
  std::fprintf(out_, "  eval @ update %d: mean held-out loss %.4f (", e.update, e.mean_loss);
  bool first = true;
  for (const SliceLoss& slice : e.slices) {
    std::fprintf(out_, "%s%s %.3f", first ? "" : ", ", slice.name.c_str(), slice.loss);
    first = false;
  }
  std::fprintf(out_, ")\n");
}

void TerminalProgress::Print(const CheckpointEvent& e) {
  EndBar();
  std::fprintf(out_, "  checkpoint @ update %d (%s): %s\n", e.update, e.reason.c_str(),
               e.path.c_str());
}

void TerminalProgress::Print(const FinishEvent& e) {
  EndBar();
  if (e.updates_trained == 0) {
    std::fprintf(out_, "nothing to train: resumed at update %d, the last; held-out loss %.4f\n",
                 e.updates, e.eval_mean_loss);
  } else {
    std::fprintf(
        out_, "finished %d updates in %s: train loss %.4f, held-out loss %.4f, %.1f samples/s\n",
        e.updates, FormatDuration(e.elapsed_seconds).c_str(), e.final_train_loss.value_or(0),
        e.eval_mean_loss, e.samples_per_second.value_or(0));
  }
  std::fprintf(out_, "  model: %s (sha256 %.12s)\n", e.model_path.c_str(),
               e.model_sha256.hex.c_str());
  const std::string mfu = !e.mfu ? "not reported: " + e.measurement_note
                                 : std::to_string(*e.mfu * 100.0).substr(0, 5) + "%";
  std::fprintf(out_, "  peak memory %s; MFU %s\n", FormatBytes(e.peak_bytes).c_str(), mfu.c_str());
}

void TerminalProgress::Print(const WarningEvent& e) {
  EndBar();
  std::fprintf(out_, "warning (%s): %s\n", e.kind.c_str(), e.message.c_str());
}

void TerminalProgress::Print(const ErrorEvent& e) {
  EndBar();
  const std::string phase = e.phase ? " in " + *e.phase : "";
  std::fprintf(out_, "error (%s%s): %s\n", e.kind.c_str(), phase.c_str(), e.message.c_str());
}

void TerminalProgress::Print(const PlanEvent& e) {
  std::fprintf(out_, "planner chose microbatch %d, checkpointed blocks %s, %s\n",
               e.plan.plan.microbatch, nlohmann::json(e.plan.plan.checkpoint_blocks).dump().c_str(),
               ToString(e.plan.plan.precision));
}

}  // namespace trainerd
