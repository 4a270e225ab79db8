// libFuzzer target: the tuning-log reader (autotune::load_records), as `kiln compile
// --tuning-log` and a resumed `kiln tune` read a log of JSON lines. The bytes become a regular
// file in memory. A corrupt line must be skipped with a warning naming the line, never crash;
// every record that was read must survive Record::to_json and Record::from_json unchanged in
// its key fields (what a resumed run writes back is read the same way).
#include "fuzz_util.h"
#include "kiln/autotune/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  static kiln::fuzz::MemFile log("record_fuzz_log");
  log.set(data, size);
  kiln::fuzz::expect_user_errors_only("record_fuzz", bytes, [&] {
    kiln::autotune::RecordLog got = kiln::autotune::load_records(log.path(), false);
    if (got.warnings.size() != got.skipped) {
      std::fprintf(stderr, "record_fuzz: %zu warnings for %zu skipped lines\n", got.warnings.size(),
                   got.skipped);
      std::abort();
    }
    for (const kiln::autotune::Record& r : got.records) {
      kiln::autotune::Record back = kiln::autotune::Record::from_json(r.to_json());
      if (back.task != r.task || back.workload != r.workload || back.target != r.target ||
          back.config != r.config || back.result.ok() != r.result.ok() ||
          back.result.runs.size() != r.result.runs.size()) {
        std::fprintf(stderr, "record_fuzz: a record did not round-trip: %s\n",
                     r.to_json().dump().c_str());
        std::abort();
      }
    }
  });
  return 0;
}
