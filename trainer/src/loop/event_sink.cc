#include "trainerd/trainer/loop/event_sink.h"

#include <string>

#include "trainerd/trainer/spec/units.h"

namespace trainerd {

void JsonLinesSink::Emit(const nlohmann::json& event) {
  const std::string line = event.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

void TerminalProgress::EndBar() {
  if (bar_open_) std::fputc('\n', out_);
  bar_open_ = false;
}

void TerminalProgress::Emit(const nlohmann::json& event) {
  const std::string kind = event.value("event", "");
  if (kind == "start") {
    const auto& plan = event["plan"];
    std::fprintf(out_, "trainer-run: %s model, %lld parameters, %lld updates of %d samples\n",
                 event["model"]["kind"].get<std::string>().c_str(),
                 event["model"]["parameters"].get<long long>(), event["updates"].get<long long>(),
                 event["effective_batch"].get<int>());
    std::string checkpointed = "none";
    if (!plan["checkpoint_blocks"].empty()) checkpointed = plan["checkpoint_blocks"].dump();
    std::fprintf(out_,
                 "  plan: microbatch %d x %d accumulation steps, checkpointed blocks %s, %s; "
                 "%d threads on %s\n",
                 plan["microbatch"].get<int>(), plan["accumulation_steps"].get<int>(),
                 checkpointed.c_str(), plan["precision"].get<std::string>().c_str(),
                 event["threads"].get<int>(), event["device"].get<std::string>().c_str());
    std::fprintf(out_, "  data: %zu slices, fingerprint %.12s\n", event["data"]["slices"].size(),
                 event["data"]["fingerprint"].get<std::string>().c_str());
    if (event["resumed_from_update"].get<long long>() > 0) {
      std::fprintf(out_, "  resumed from update %lld\n",
                   event["resumed_from_update"].get<long long>());
    }
  } else if (kind == "update") {
    const long long n = event["update"], total = event["updates"];
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * n / std::max(1LL, total));
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r[%s] %lld/%lld loss %.4f  %.1f samples/s  ETA %s   ", bar.c_str(), n,
                 total, event["loss"].get<double>(), event["samples_per_second"].get<double>(),
                 FormatDuration(event["eta_seconds"].get<double>()).c_str());
    bar_open_ = true;
  } else if (kind == "eval") {
    EndBar();
    std::fprintf(out_, "  eval @ update %lld: mean held-out loss %.4f (",
                 event["update"].get<long long>(), event["mean_loss"].get<double>());
    bool first = true;
    for (const auto& slice : event["slices"]) {
      std::fprintf(out_, "%s%s %.3f", first ? "" : ", ", slice["name"].get<std::string>().c_str(),
                   slice["loss"].get<double>());
      first = false;
    }
    std::fprintf(out_, ")\n");
  } else if (kind == "checkpoint") {
    EndBar();
    std::fprintf(out_, "  checkpoint @ update %lld (%s): %s\n", event["update"].get<long long>(),
                 event["reason"].get<std::string>().c_str(),
                 event["path"].get<std::string>().c_str());
  } else if (kind == "finish") {
    EndBar();
    if (event["updates_trained"].get<long long>() == 0) {
      std::fprintf(out_, "nothing to train: resumed at update %lld, the last; held-out loss %.4f\n",
                   event["updates"].get<long long>(), event["eval_mean_loss"].get<double>());
    } else {
      std::fprintf(
          out_,
          "finished %lld updates in %s: train loss %.4f, held-out loss %.4f, %.1f samples/s\n",
          event["updates"].get<long long>(),
          FormatDuration(event["elapsed_seconds"].get<double>()).c_str(),
          event["final_train_loss"].get<double>(), event["eval_mean_loss"].get<double>(),
          event["samples_per_second"].get<double>());
    }
    std::fprintf(out_, "  model: %s (sha256 %.12s)\n",
                 event["model_path"].get<std::string>().c_str(),
                 event["model_sha256"].get<std::string>().c_str());
    const std::string mfu =
        event["mfu"].is_null()
            ? "not reported: " + event["measurement_note"].get<std::string>()
            : std::to_string(event["mfu"].get<double>() * 100.0).substr(0, 5) + "%";
    std::fprintf(out_, "  peak memory %s; MFU %s\n",
                 FormatBytes(event["peak_bytes"].get<std::int64_t>()).c_str(), mfu.c_str());
  } else if (kind == "warning") {
    EndBar();
    std::fprintf(out_, "warning (%s): %s\n", event["kind"].get<std::string>().c_str(),
                 event["message"].get<std::string>().c_str());
  } else if (kind == "plan") {
    std::fprintf(out_, "planner chose microbatch %d, checkpointed blocks %s, %s\n",
                 event["plan"]["microbatch"].get<int>(),
                 event["plan"]["checkpoint_blocks"].dump().c_str(),
                 event["plan"]["precision"].get<std::string>().c_str());
  } else if (kind == "error") {
    EndBar();
    std::fprintf(out_, "error (%s): %s\n", event["kind"].get<std::string>().c_str(),
                 event["message"].get<std::string>().c_str());
  }
  std::fflush(out_);
}

}  // namespace trainerd
