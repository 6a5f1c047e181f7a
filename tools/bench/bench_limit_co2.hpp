#pragma once
// The elementwise passes of the CO2 limit (bench_limit_co2.cpp, compiled with -ffast-math).
#include <cstddef>

namespace limit {

// scikit-learn's Mauna Loa kernel at one theta: c = amplitudes, i = 1 / length^2, is = 1 / l_sine^2,
// al = the rational quadratic's alpha, z3 = i3 / (2 al).
struct Co2Params {
  double c1, i1, c2, i2, is, c3, al, i3, c4, i4, z3;
};

// out[i] = k(sq[i], sin2[i]) without the noise term.
void co2_fill(const Co2Params& p, const double* sq, const double* sin2, std::size_t count, double* out);

// g[k] += sum_i w[i] dk/dtheta_k (sq[i], sin2[i]) for k = 0..9 (theta[10], the noise, is diagonal).
void co2_contract(const Co2Params& p, const double* sq, const double* sin2, const double* w, std::size_t count,
                  double* g);

}  // namespace limit
