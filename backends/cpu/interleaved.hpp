#pragma once
// Batched linear algebra of small matrices, a group of matrices at a time in the interleaved layout of vendor BLAS
// libraries' compact routines: element (i, j) of every matrix in the group side by side in one vector register, so
// that each step of the textbook algorithm is one vector operation over the group whatever the order. A matrix at a
// time, Eigen's dynamic-size kernels do a few elements of work per call and per loop setup at these orders.
#include <cstdint>

#include "../../core/backend.hpp"

namespace vt::cpu {

// Orders up to this run interleaved: a group's matrix (order^2 registers of 32 bytes) then fits a core's 32 KiB L1.
constexpr std::int64_t interleaved_max_order = 32;

inline bool interleaved_order(std::int64_t n) { return n >= 1 && n <= interleaved_max_order; }
inline bool interleaved_solve(const TrsmArgs& s) { return interleaved_order(s.n) && s.nrhs <= interleaved_max_order; }

// L with L L^T = A from A's lower triangle (l may be a), L's strict upper triangle zero, or not written where
// lower_only. info[i]: 0, or the order of matrix i's first leading minor that is not positive definite or whose pivot
// is not finite (LAPACK's info); then, where nan_rows, L's rows from that minor on are NaN.
void interleaved_cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                          void* l, std::int64_t stride_l, bool lower_only, bool nan_rows, std::int32_t* info);

// (L L^T)^-1 from L's lower triangle, exactly symmetric (out may be l).
void interleaved_cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                                  void* out, std::int64_t stride_out);

// The symmetric cotangent of A from L's and the cotangent of L's lower triangles, in place over g (Murray 2016).
void interleaved_cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                   std::int64_t stride_l, void* g, std::int64_t stride_g);

// CpuBackend::trsm's solves, for interleaved_solve(s).
void interleaved_trsm(const TrsmArgs& s);

}  // namespace vt::cpu
