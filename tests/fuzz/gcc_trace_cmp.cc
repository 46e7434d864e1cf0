// GCC's -fsanitize-coverage=trace-cmp also reports floating-point comparisons, which
// libFuzzer has no hooks for: the GCC-built harness (CMakeLists.txt) ignores them.
extern "C" {
void __sanitizer_cov_trace_cmpf(float, float) {}
void __sanitizer_cov_trace_cmpd(double, double) {}
}
