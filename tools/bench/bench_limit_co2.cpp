// The CO2 limit's elementwise passes (tools/bench/bench_limit.cpp), in a file of their own that
// CMake compiles with -ffast-math: that lets GCC call glibc's vector exp and log (libmvec, within 4
// ulp) and reorder the 10 gradient sums into vector lanes. Most of the limit's time is these
// 5 exponentials and 1 logarithm a pair, so this is what makes it a limit. Nothing here includes a
// template that vtape also instantiates (the flags would otherwise leak into vtape's copies).
#include "bench_limit_co2.hpp"

#include <cmath>

namespace limit {

void co2_fill(const Co2Params& p, const double* sq, const double* sin2, std::size_t count, double* out) {
  for (std::size_t i = 0; i < count; ++i) {
    const double s = sq[i], s2 = sin2[i];
    out[i] = p.c1 * std::exp(-0.5 * s * p.i1) + p.c2 * std::exp(-0.5 * s * p.i2 - 2 * s2 * p.is) +
             p.c3 * std::exp(-p.al * std::log(1 + s * p.z3)) + p.c4 * std::exp(-0.5 * s * p.i4);
  }
}

void co2_contract(const Co2Params& p, const double* sq, const double* sin2, const double* w, std::size_t count,
                  double* g) {
  double g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0, g8 = 0, g9 = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double s = sq[i], s2 = sin2[i], wi = w[i];
    const double k1 = wi * p.c1 * std::exp(-0.5 * s * p.i1);
    const double k2 = wi * p.c2 * std::exp(-0.5 * s * p.i2 - 2 * s2 * p.is);
    const double base = 1 + s * p.z3, lb = std::log(base);
    const double k3 = wi * p.c3 * std::exp(-p.al * lb);
    const double k4 = wi * p.c4 * std::exp(-0.5 * s * p.i4);
    g0 += k1;
    g1 += k1 * s;
    g2 += k2;
    g3 += k2 * s;
    g4 += k2 * s2;
    g5 += k3;
    g6 += k3 * (s * p.z3 / base - lb);
    g7 += k3 * s / base;
    g8 += k4;
    g9 += k4 * s;
  }
  // The constant factors of each derivative, applied once.
  g[0] += g0;
  g[1] += g1 * p.i1;
  g[2] += g2;
  g[3] += g3 * p.i2;
  g[4] += g4 * 4 * p.is;
  g[5] += g5;
  g[6] += g6 * p.al;
  g[7] += g7 * p.i3;
  g[8] += g8;
  g[9] += g9 * p.i4;
}

}  // namespace limit
