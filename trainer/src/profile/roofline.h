// The roofline model of a piece of work on one device: with a measured peak compute P
// (FLOP/s, the matrix-product probe of throughput.h) and a measured memory bandwidth B
// (bytes/s, the copy/triad probe of memory_bandwidth.h), work of F FLOPs moving D bytes has
// the arithmetic intensity I = F / D, and no schedule runs it faster than the attainable
// rate min(P, I x B). Its achieved rate F / t is then a fraction of that bound. Work whose
// FLOPs are not counted (elementwise ops, normalisation) is judged on bandwidth alone:
// (D / t) / B, the same fraction the formula gives as I goes to 0. Torch-free.
#pragma once

#include <string>

namespace trainerd {

struct Roof {
  double peak_flops = 0;                  // P, FLOP/s
  double bandwidth_bytes_per_second = 0;  // B
  // The intensity at which the two roofs meet, P / B (FLOP per byte).
  double RidgeIntensity() const;
};

struct RooflinePoint {
  double flops = 0;           // counted FLOPs; 0 when not counted
  double bytes = 0;           // bytes read and written
  double seconds = 0;         // time spent
  double intensity = 0;       // flops / bytes
  double achieved_flops = 0;  // flops / seconds
  double achieved_bytes_per_second = 0;
  double attainable_flops = 0;  // min(P, I x B); 0 when flops are not counted
  // achieved / attainable (compute counted), else achieved bandwidth / B.
  double fraction_of_bound = 0;
  std::string bound;  // "compute" (I above the ridge), "memory", or "" when nothing is known
};

// The point of `flops`, `bytes` and `seconds` under `roof`. Zero seconds or bytes give a
// point with only the known fields set.
RooflinePoint PlaceOnRoofline(const Roof& roof, double flops, double bytes, double seconds);

}  // namespace trainerd
