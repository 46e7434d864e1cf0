// trainer-run: trains one job in the foreground. See `trainer-run --help`.
#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "trainerd/trainer/event_sink.h"
#include "trainerd/trainer/exit_codes.h"
#include "trainerd/trainer/job_spec_parser.h"
#include "trainerd/trainer/parity.h"
#include "trainerd/trainer/text_corpus.h"
#include "trainerd/trainer/trainer.h"

namespace {

constexpr const char* kUsage =
    R"(usage: trainer-run --config FILE [--plan FILE] [--output-dir DIR] [--resume] [--json]
       trainer-run --config FILE [--plan FILE] --parity [--parity-updates N] [--json]

Trains the job described by a YAML job spec in the foreground.

options:
  --config FILE        job spec (model, data, optimizer, schedule, training, plan, runtime)
  --plan FILE          replace the spec's plan with this YAML/JSON mapping: microbatch,
                       accumulation_steps, checkpoint_blocks (all, none or [0, 2]),
                       precision (fp32, bf16, fp16)
  --output-dir DIR     where the training checkpoint (checkpoint.pt) and the model artifact
                       (model.pt) are written; default: runs/<config name>
  --resume             continue from DIR/checkpoint.pt (same job; the plan may differ)
  --parity             release check of the plan: N updates of the plan against the
                       reference (no checkpointing, real large batch, fp32), same data and
                       seed; prints the max gradient and loss differences and a verdict;
                       exit 0 pass, 7 fail
  --parity-updates N   updates in the parity run (default 5)
  --json               JSON on stdout even on a terminal (default when stdout is not one)
  --help               this text

output: on a terminal a progress bar; otherwise one JSON object per line with "event" one of
  start, update, eval, checkpoint, finish, error (schema: docs/trainer-run.md).

signals: SIGTERM or SIGINT finish the current update, write a checkpoint and exit 75.

exit codes:
  0   finished; model artifact written
  1   internal error (LibTorch, IO)
  2   usage error or invalid config
  3   invalid data (missing, empty, unreadable, too short for block_size)
  5   --resume: checkpoint missing, corrupt, or written by a different job
  6   training diverged (non-finite loss)
  7   --parity: the plan does not match the reference within tolerance
  75  interrupted by a signal after writing a checkpoint
)";

std::atomic<bool> g_stop_requested{false};

extern "C" void RequestStop(int /*signal*/) { g_stop_requested.store(true); }

struct Args {
  std::string config;
  std::string plan;
  bool parity = false;
  int parity_updates = 5;
  std::string output_dir;
  bool resume = false;
  bool json = false;
};

void PrintParity(const trainerd::ParityReport& report, const trainerd::PlanSpec& plan, bool json) {
  if (json) {
    std::cout << report.ToJson(plan).dump() << std::endl;
    return;
  }
  std::printf(
      "parity of plan microbatch %d x %d, checkpoint %zu blocks, %s against the fp32 "
      "large-batch reference, %d updates:\n",
      plan.microbatch, plan.accumulation_steps, plan.checkpoint_blocks.size(),
      trainerd::ToString(plan.precision), report.updates);
  std::printf("  max |grad difference|  %.3g  (tolerance %.3g, at %s)\n", report.max_grad_diff,
              report.tolerances.max_grad_diff, report.max_grad_parameter.c_str());
  std::printf("  max |loss difference|  %.3g  (tolerance %.3g)\n", report.max_loss_diff,
              report.tolerances.max_loss_diff);
  std::printf("%s\n", report.pass ? "PASS" : "FAIL");
}

int UsageError(const std::string& message) {
  std::cerr << "trainer-run: " << message << "\n\n" << kUsage;
  return trainerd::exit_code::kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      return i + 1 < argc ? argv[++i] : (UsageError(std::string(flag) + " needs a value"), nullptr);
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return trainerd::exit_code::kOk;
    } else if (arg == "--config") {
      const char* v = value("--config");
      if (v == nullptr) return trainerd::exit_code::kUsage;
      args.config = v;
    } else if (arg == "--output-dir") {
      const char* v = value("--output-dir");
      if (v == nullptr) return trainerd::exit_code::kUsage;
      args.output_dir = v;
    } else if (arg == "--plan") {
      const char* v = value("--plan");
      if (v == nullptr) return trainerd::exit_code::kUsage;
      args.plan = v;
    } else if (arg == "--parity") {
      args.parity = true;
    } else if (arg == "--parity-updates") {
      const char* v = value("--parity-updates");
      if (v == nullptr) return trainerd::exit_code::kUsage;
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end != '\0' || n < 1 || n > 1000) {
        return UsageError(std::string("--parity-updates: expected an integer in [1, 1000], got '") +
                          v + "'");
      }
      args.parity_updates = static_cast<int>(n);
    } else if (arg == "--resume") {
      args.resume = true;
    } else if (arg == "--json") {
      args.json = true;
    } else {
      return UsageError("unknown argument '" + arg + "'");
    }
  }
  if (args.config.empty()) return UsageError("--config FILE is required");

  std::unique_ptr<trainerd::EventSink> sink;
  if (args.json || !::isatty(STDOUT_FILENO)) {
    sink = std::make_unique<trainerd::JsonLinesSink>(stdout);
  } else {
    sink = std::make_unique<trainerd::TerminalProgress>(stdout);
  }
  auto fail = [&](const char* kind, const std::string& message, int code) {
    sink->Emit({{"event", "error"}, {"kind", kind}, {"message", message}});
    if (!::isatty(STDOUT_FILENO) || args.json) std::cerr << "trainer-run: " << message << "\n";
    return code;
  };

  try {
    trainerd::Result<trainerd::JobSpec> spec = trainerd::ParseJobSpecFile(args.config);
    if (!spec.ok()) return fail("config", spec.status().message(), trainerd::exit_code::kUsage);
    if (!args.plan.empty()) {
      if (trainerd::Status s = trainerd::ApplyPlanFile(args.plan, &*spec); !s.ok()) {
        return fail("config", s.message(), trainerd::exit_code::kUsage);
      }
    }
    if (spec->runtime.device == "cuda" && !torch::cuda::is_available()) {
      return fail("config",
                  args.config + ": runtime.device: cuda requested but this LibTorch (" +
                      TORCH_VERSION + ") sees no CUDA device; use device: cpu",
                  trainerd::exit_code::kUsage);
    }
    trainerd::ConfigureThreads(spec->runtime);
    trainerd::Result<trainerd::TextCorpus> corpus =
        trainerd::TextCorpus::Load(spec->data, spec->model.gpt.block_size);
    if (!corpus.ok()) return fail("data", corpus.status().message(), trainerd::exit_code::kBadData);

    if (args.parity) {
      trainerd::Result<trainerd::ParityReport> report =
          trainerd::CheckParity(*spec, *corpus, args.parity_updates);
      if (!report.ok())
        return fail("internal", report.status().message(), trainerd::exit_code::kInternal);
      PrintParity(*report, spec->plan, args.json || !::isatty(STDOUT_FILENO));
      return report->pass ? trainerd::exit_code::kOk : trainerd::exit_code::kParityFailed;
    }
    if (args.output_dir.empty()) {
      args.output_dir = "runs/" + std::filesystem::path(args.config).stem().string();
    }
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) {
      return fail("io", "cannot create --output-dir " + args.output_dir + ": " + ec.message(),
                  trainerd::exit_code::kInternal);
    }
    trainerd::TrainerOptions options;
    options.checkpoint_path = args.output_dir + "/checkpoint.pt";
    options.model_path = args.output_dir + "/model.pt";
    options.resume = args.resume;
    options.stop_requested = &g_stop_requested;
    std::signal(SIGTERM, RequestStop);
    std::signal(SIGINT, RequestStop);

    trainerd::Trainer trainer(*spec, *corpus, sink.get());
    trainerd::Result<trainerd::TrainOutcome> outcome = trainer.Run(options);
    if (!outcome.ok()) {
      const trainerd::Status& s = outcome.status();
      using Code = trainerd::Status::Code;
      if (s.code() == Code::kNotFound || s.code() == Code::kCorruption ||
          s.code() == Code::kFailedPrecondition) {
        return fail("checkpoint", s.message(), trainerd::exit_code::kBadCheckpoint);
      }
      return fail("internal", s.message(), trainerd::exit_code::kInternal);
    }
    switch (outcome->kind) {
      case trainerd::TrainOutcome::Kind::kFinished:
        return trainerd::exit_code::kOk;
      case trainerd::TrainOutcome::Kind::kInterrupted:
        return trainerd::exit_code::kInterrupted;
      case trainerd::TrainOutcome::Kind::kDiverged:
        return fail("nan", outcome->message, trainerd::exit_code::kNonFiniteLoss);
    }
    return trainerd::exit_code::kInternal;
  } catch (const std::exception& e) {
    return fail("internal", e.what(), trainerd::exit_code::kInternal);
  }
}
