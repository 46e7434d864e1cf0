// libFuzzer harness for the job spec parser: any bytes as job YAML. ParseJobSpecText must
// return a spec or an error naming the file, never throw, crash, leak or hit undefined
// behaviour. Seeds: corpus/job_spec_parser/ (configs/default.yaml and variants).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "trainerd/trainer/spec/job_spec_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string kOrigin = "fuzz/job.yaml";
  const std::string text(reinterpret_cast<const char*>(data), size);
  const trainerd::Result<trainerd::JobSpec> spec =
      trainerd::ParseJobSpecText(text, kOrigin, "/fuzz/data");
  if (!spec.ok()) {
    // The standard: every error names the file (and the line and key where there is one).
    trainerd::fuzz::Expect(spec.status().message().starts_with(kOrigin),
                           "error does not name the file: " + spec.status().message());
  }
  return 0;
}
