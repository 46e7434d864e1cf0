// libFuzzer harness for the serving side's outcome files (trainerctl outcome import): any
// bytes as a file, parsed as trainerctl parses it (ParseOutcomeFile: JSON lines or CSV), each
// accepted line sent as the control request carries it and read back as the daemon reads it
// (ToJson, OutcomeLineFromJson), and the text as an outcome time (ParseOutcomeTime). Nothing
// may throw, crash or hit undefined behaviour; an accepted line survives the round trip
// unchanged, within the bounds the store keeps (a value within +-10^15, a count in
// [1, 10^12], a time in 1970-5138); an error names the file. Seeds: corpus/outcome_lines/.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "trainerd/daemon/outcome_lines.h"
#include "trainerd/store/records.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace trainerd::daemon;
  using trainerd::fuzz::Expect;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (const std::optional<double> at = ParseOutcomeTime(text)) {
    Expect(std::isfinite(*at), "a time that is not finite: " + text);
  }
  const trainerd::Result<std::vector<OutcomeLine>> lines = ParseOutcomeFile(text, "o.csv");
  if (!lines.ok()) {
    Expect(lines.status().message().rfind("o.csv", 0) == 0,
           "an error that does not name the file: " + lines.status().message());
    return 0;
  }
  for (const OutcomeLine& line : *lines) {
    Expect(std::abs(line.value) <= trainerd::store::kMaxOutcomeValue, "a value out of bounds");
    Expect(line.count >= 1 && line.count <= trainerd::store::kMaxOutcomeCount,
           "a count out of bounds");
    Expect(!line.at || (*line.at >= 0 && *line.at <= 1e11), "a time out of bounds");
    const std::string sent = ToJson(line).dump();  // throws on invalid UTF-8
    const trainerd::Result<OutcomeLine> read =
        OutcomeLineFromJson(nlohmann::json::parse(sent), "o.csv:1");
    Expect(read.ok(), "a line the daemon refuses after trainerctl accepted it: " +
                          (read.ok() ? std::string() : read.status().message()));
    Expect(*read == line, "a line changed on its way to the daemon: " + sent);
  }
  return 0;
}
