// Batched matrix kernels on Eigen: Map views over slices of the batched buffer (no copies),
// in-place factorization, parallel across the batch. A single product is split across the threads
// by columns (CpuBackend::gemm), a single large factorization or inverse by fixed blocks
// (split_single); Eigen's own threading is used only for other single matrices: inside the
// batch-parallel region it runs single-threaded, so the cores are not oversubscribed.
#include "../../core/eigen.hpp"
#include <Eigen/Cholesky>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../core/error.hpp"
#include "cpu_backend.hpp"
#include "first_failure.hpp"
#include "interleaved.hpp"
#include "parallel.hpp"

namespace vt::cpu {

namespace {
template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapMat = Eigen::Map<RowMat<T>>;
template <class T>
using ConstMapMat = Eigen::Map<const RowMat<T>>;
}  // namespace

namespace {

// Row blocks of symmetric_product, and the smallest order it runs at: below three blocks the
// full product is faster (single thread, tools/bench/bench_symmetric).
constexpr Eigen::Index symmetric_block = 64, symmetric_min_order = 3 * symmetric_block;

// C = alpha a b + beta C for a product a b (a: m x k, b: k x m, Eigen expressions of op(A), op(B))
// known to be symmetric, by row blocks of the lower triangle: block i is a's rows i times b's
// columns up to the diagonal's end, about half the flops of the full product. Each block's part
// left of the diagonal is then mirrored above it, so C is exactly symmetric; unless `lower_only`
// (GemmArgs::lower_only): nobody reads above the diagonal blocks, which are left as they were.
template <class MA, class MB, class MC, class T>
void symmetric_product(const MA& a, const MB& b, MC& c, T alpha, T beta, bool lower_only) {
  const Eigen::Index m = c.rows();
  for (Eigen::Index r = 0; r < m; r += symmetric_block) {
    const Eigen::Index rows = std::min(symmetric_block, m - r), cols = r + rows;
    auto lower = c.block(r, 0, rows, cols);
    if (beta == T(0)) {
      lower.noalias() = alpha * a.middleRows(r, rows) * b.leftCols(cols);
    } else {
      if (beta != T(1)) lower *= beta;
      lower.noalias() += alpha * a.middleRows(r, rows) * b.leftCols(cols);
    }
    if (lower_only) continue;
    c.block(0, r, r, rows) = c.block(r, 0, rows, r).transpose();
    auto diagonal = c.block(r, r, rows, rows);
    diagonal.template triangularView<Eigen::StrictlyUpper>() = diagonal.transpose();
  }
}

// Products with one to four rows (m) or an inner dimension (k) of one to four: the low-rank
// cotangents of solves make them ([x, xbar]^T F, [x, xbar] W). Eigen's GEMM packs all of op(B) for a
// product that reads each element of it a few times: streaming op(B) once is cheaper.
constexpr Eigen::Index thin_product = 4;  // few_rows_product has a kernel for each m up to it
// A single thin product above this many multiply-adds keeps Eigen's GEMM, which can use every core.
constexpr std::int64_t thin_single_most = std::int64_t{1} << 22;

// Columns [j0, j0 + W) of C = alpha a b + beta C for M rows of C and a row-major b (leading dimension ldb): the M x W
// block of C is summed in registers while b's rows stream past once, each element of C in order of b's rows.
template <int M, int W, class MA, class T>
void few_rows_block(const MA& a, const T* b, std::ptrdiff_t ldb, T* c, std::ptrdiff_t ldc, std::ptrdiff_t j0, T alpha,
                    T beta) {
  T sum[M][W];
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < W; ++j) sum[r][j] = beta == T(0) ? T(0) : beta * c[r * ldc + j0 + j];
  for (Eigen::Index i = 0; i < a.cols(); ++i) {
    const T* row = b + i * ldb + j0;
    for (int r = 0; r < M; ++r) {
      const T scale = alpha * a(r, i);
      for (int j = 0; j < W; ++j) sum[r][j] += scale * row[j];
    }
  }
  for (int r = 0; r < M; ++r)
    for (int j = 0; j < W; ++j) c[r * ldc + j0 + j] = sum[r][j];
}

// Blocks of 4 vector registers a row for up to 2 rows, 2 for more: at most 8 accumulators, which leaves room in AVX2's
// 16 registers (AVX-512 has 32).
template <int M, class MA, class T>
void few_rows_by_blocks(const MA& a, const T* b, std::ptrdiff_t ldb, T* c, std::ptrdiff_t ldc, std::ptrdiff_t n,
                        T alpha, T beta) {
  constexpr int width = Eigen::internal::packet_traits<T>::size * (M <= 2 ? 4 : 2);
  std::ptrdiff_t j = 0;
  for (; j + width <= n; j += width) few_rows_block<M, width>(a, b, ldb, c, ldc, j, alpha, beta);
  for (; j + 8 <= n; j += 8) few_rows_block<M, 8>(a, b, ldb, c, ldc, j, alpha, beta);
  for (; j < n; ++j) few_rows_block<M, 1>(a, b, ldb, c, ldc, j, alpha, beta);
}

// C = alpha a b + beta C with a: m x k, m <= thin_product. A row-major b is streamed by rows into
// blocks of C held in registers (few_rows_by_blocks), which reads and writes C once where updating C's rows from
// each of b's rows rereads them (tools/bench/bench_cholesky --kernels, "thin gemm"); a transposed one has contiguous
// columns, each dotted with the m rows of alpha a, copied contiguous first.
template <class MA, class MB, class MC, class T>
void few_rows_product(const MA& a, const MB& b, MC& c, T alpha, T beta) {
  if constexpr (std::is_same_v<MB, ConstMapMat<T>>) {
    const auto by_blocks = [&]<int M>() {
      few_rows_by_blocks<M>(a, b.data(), b.outerStride(), c.data(), c.outerStride(), c.cols(), alpha, beta);
    };
    switch (c.rows()) {
      case 1: return by_blocks.template operator()<1>();
      case 2: return by_blocks.template operator()<2>();
      case 3: return by_blocks.template operator()<3>();
      case 4: return by_blocks.template operator()<4>();
      default:
        assert(c.rows() == 0);  // m <= thin_product
        return;
    }
  } else {
    if (beta == T(0)) c.setZero();
    else if (beta != T(1)) c *= beta;
    const RowMat<T> scaled = alpha * a;
    for (Eigen::Index j = 0; j < c.cols(); ++j)
      for (Eigen::Index r = 0; r < c.rows(); ++r) c(r, j) += scaled.row(r).dot(b.col(j));
  }
}

// C = alpha a b + beta C with an inner dimension k <= thin_product and a row-major b: each row of C
// from the k rows of b, which stay in L1.
template <class MA, class MB, class MC, class T>
void few_inner_product(const MA& a, const MB& b, MC& c, T alpha, T beta) {
  for (Eigen::Index i = 0; i < c.rows(); ++i) {
    auto row = c.row(i);
    if (beta == T(0)) row.setZero();
    else if (beta != T(1)) row *= beta;
    for (Eigen::Index l = 0; l < b.rows(); ++l) row += (alpha * a(i, l)) * b.row(l);
  }
}

// Products whose orders are all at most tiny_order: a loop of known trip counts for each (m, n, k), which the compiler
// unrolls. Eigen's dynamic-size product (and few_rows_product's copy of a) costs more to set up than the arithmetic of
// a matrix this small, which a loop body over 2 x 2 covariances pays at every step.
constexpr std::int64_t tiny_order = 4;

// C = alpha op(A) op(B) + beta C for count matrices, row-major, op(A) M x K, op(B) K x N, each element of C summed in
// order of l. op(A)(i, l) = a[i * a_row + l * a_inner], op(B)(l, j) = b[l * b_inner + j * b_col].
template <int M, int N, int K, class T>
void tiny_products(const GemmArgs& g, const T* a, const T* b, T* c, T alpha, T beta, std::int64_t first,
                   std::int64_t last) {
  const std::int64_t a_row = g.trans_a ? 1 : K, a_inner = g.trans_a ? M : 1;
  const std::int64_t b_inner = g.trans_b ? 1 : N, b_col = g.trans_b ? K : 1;
  for (std::int64_t p = first; p < last; ++p) {
    const T* ap = a + p * g.stride_a;
    const T* bp = b + p * g.stride_b;
    T* cp = c + p * g.stride_c;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        T sum = T(0);
        for (int l = 0; l < K; ++l) sum += ap[i * a_row + l * a_inner] * bp[l * b_inner + j * b_col];
        cp[i * N + j] = beta == T(0) ? alpha * sum : alpha * sum + beta * cp[i * N + j];
      }
    if (g.symmetric && !g.lower_only)  // exactly symmetric, as every marked product (see gemm)
      for (int i = 0; i < M; ++i)
        for (int j = i + 1; j < N; ++j) cp[i * N + j] = cp[j * N + i];
  }
}

template <class T>
using TinyProducts = void (*)(const GemmArgs&, const T*, const T*, T*, T, T, std::int64_t, std::int64_t);

// tiny_products for every (m, n, k) up to tiny_order, indexed by ((m - 1) tiny_order + n - 1) tiny_order + k - 1.
template <class T, std::size_t... I>
constexpr std::array<TinyProducts<T>, sizeof...(I)> tiny_product_table(std::index_sequence<I...>) {
  constexpr int t = tiny_order;
  return {&tiny_products<static_cast<int>(I) / (t * t) + 1, static_cast<int>(I) / t % t + 1,
                         static_cast<int>(I) % t + 1, T>...};
}

template <class T>
TinyProducts<T> tiny_products_for(const GemmArgs& g) {
  static constexpr auto table = tiny_product_table<T>(std::make_index_sequence<tiny_order * tiny_order * tiny_order>{});
  return table[static_cast<std::size_t>(((g.m - 1) * tiny_order + g.n - 1) * tiny_order + g.k - 1)];
}

}  // namespace

void CpuBackend::gemm(const GemmArgs& g) {
  if (recording()) return keep([=, this] { gemm(g); });
  visit_float_dtype(g.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* a = static_cast<const T*>(g.a);
    const T* b = static_cast<const T*>(g.b);
    T* c = static_cast<T*>(g.c);
    const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
    // Both operands as op(A), op(B), so that each product below is written once for every flag.
    // A product marked symmetric is mirrored, exactly symmetric, by symmetric_product or not at all.
    const bool thin_ok = !g.symmetric && (g.count > 1 || g.m * g.n * g.k <= thin_single_most);
    const auto product = [&](const auto& A, const auto& B, auto& C) {
      if (thin_ok && g.m <= thin_product) {
        few_rows_product(A, B, C, alpha, beta);
      } else if (thin_ok && !g.trans_b && g.k <= thin_product) {
        few_inner_product(A, B, C, alpha, beta);
      } else if (g.symmetric && g.m == g.n && g.m >= symmetric_min_order) {
        symmetric_product(A, B, C, alpha, beta, g.lower_only);
      } else if (beta == T(0)) {
        C.noalias() = alpha * A * B;
      } else {
        if (beta != T(1)) C *= beta;
        C.noalias() += alpha * A * B;
      }
      // Small products marked symmetric are mirrored too: a marked product is exactly symmetric whatever its order
      // (jit's fused passes rely on it, autodiff/jit/fuse.cpp).
      if (g.symmetric && !g.lower_only && g.m == g.n && g.m < symmetric_min_order)
        C.template triangularView<Eigen::StrictlyUpper>() = C.transpose();
    };
    // A single product under this many multiply-adds runs on the calling thread: Eigen splits far smaller products
    // across the cores, and opening a parallel region then costs more than the product (a jit plan's small-batch call
    // runs many). omp_set_num_threads sets the calling thread's own setting, which Eigen reads.
    constexpr std::int64_t single_thread_most = std::int64_t{1} << 20;
    const int threads = omp_get_max_threads();
    const bool one_thread = g.count == 1 && g.m * g.n * g.k < single_thread_most && threads > 1;
    const OneThread small_product(one_thread);
    // A larger single product outside a parallel region, one that Eigen's GEMM computes (not thin, not symmetric), is
    // split by blocks of C's columns, one product per thread on that thread: no thread waits for another's packed
    // panels (Eigen's own threading does, at every panel), and each thread packs only its columns of op(B). Eigen
    // blocks the inner dimension by k alone on one thread and its kernels cover a row-major C in blocks of mr columns,
    // which divides 48 on every target, so with boundaries at multiples of 48 every element is summed as by the whole
    // product on one thread: the same bits as on one thread. It splits when every thread gets a block of 48 columns;
    // a narrower C (and a symmetric or a large thin product) keeps Eigen's threading, whose bits may depend on the
    // thread count.
    const bool by_eigen = !g.symmetric && g.m > thin_product && (g.trans_b || g.k > thin_product);
    const std::int64_t column_block = 48;
    const int parts = threads;
    if (g.count == 1 && by_eigen && !one_thread && parts > 1 && g.n / column_block >= parts && !omp_in_parallel()) {
      const std::int64_t blocks = g.n / column_block;
      FirstFailure failure;
#pragma omp parallel for schedule(static) num_threads(parts)
      for (int p = 0; p < parts; ++p)
        failure.run(p, [&] {
          omp_set_num_threads(1);  // this part on this thread, even in a team the runtime made smaller
          const std::int64_t j0 = blocks * p / parts * column_block;
          const std::int64_t j1 = p + 1 == parts ? g.n : blocks * (p + 1) / parts * column_block;
          ConstMapMat<T> A(a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k);
          ConstMapMat<T> B(b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n);
          MapMat<T> C(c, g.m, g.n);
          auto part = C.middleCols(j0, j1 - j0);
          const auto with_b = [&](const auto& opA) {
            if (g.trans_b) product(opA, B.transpose().middleCols(j0, j1 - j0), part);
            else product(opA, B.middleCols(j0, j1 - j0), part);
          };
          if (g.trans_a) with_b(A.transpose());
          else with_b(A);
        });
      failure.rethrow();
      return;
    }
    if (g.m >= 1 && g.n >= 1 && g.k >= 1 && std::max({g.m, g.n, g.k}) <= tiny_order) {
      const TinyProducts<T> products = tiny_products_for<T>(g);
      if (!worth_threads(g.count, g.m * g.n * g.k)) return products(g, a, b, c, alpha, beta, 0, g.count);
      for_each_matrix(g.count, g.m * g.n * g.k,
                      [&](NoState&, std::int64_t i) { products(g, a, b, c, alpha, beta, i, i + 1); });
      return;
    }
    // Eigen's product allocates its blocking workspace, which may throw: for_each_matrix rethrows the first.
    for_each_matrix(g.count, g.m * g.n * g.k, [&](NoState&, std::int64_t i) {
      ConstMapMat<T> A(a + i * g.stride_a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k);
      ConstMapMat<T> B(b + i * g.stride_b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n);
      MapMat<T> C(c + i * g.stride_c, g.m, g.n);
      if (!g.trans_a && !g.trans_b) product(A, B, C);
      else if (g.trans_a && !g.trans_b) product(A.transpose(), B, C);
      else if (!g.trans_a && g.trans_b) product(A, B.transpose(), C);
      else product(A.transpose(), B.transpose(), C);
    });
  });
}

namespace {

template <class T>
using ColMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

// Eigen's blocked LLT's panel width (n / 8 rounded down to 16, at most 128), at least 16: the
// unblocked factorization of the diagonal blocks is the slow part at small n.
Eigen::Index cholesky_panel(Eigen::Index n) { return std::clamp<Eigen::Index>(n / 8 / 16 * 16, 16, 128); }

// Factors the diagonal block a[k:k+b, k:k+b] in place into U11, through d as its transpose L11 in
// Eigen's column-major lower form. Returns the failing column of a, or -1; d keeps L11 for the panel solve.
template <class M, class T = typename M::Scalar>
Eigen::Index factor_diagonal_block(M& a, Eigen::Index k, Eigen::Index b, ColMat<T>& d) {
  auto a11 = a.block(k, k, b, b);
  d.resize(b, b);
  d.template triangularView<Eigen::Lower>() = a11.transpose();
  const Eigen::Index failed = Eigen::internal::llt_inplace<T, Eigen::Lower>::unblocked(d);
  a11.template triangularView<Eigen::Upper>() = d.transpose();
  return failed >= 0 ? k + failed : -1;
}

// A = U^T U on column-major storage, right-looking in panels: a row-major buffer seen column-major
// holds A^T, whose upper triangle is A's lower one and whose U is A's L. Eigen's fast kernels are
// those of its own column-major lower LLT, so each panel is worked on in that form, transposed
// into workspaces: the diagonal block as L11 (unblocked), the panel as L21 = A21 L11^-T (a solve
// on the right of a column-major block), which then updates the trailing block. The copies move
// about n^2 elements in all, against n^3/3 flops. Returns the failing column, or -1.
template <class M>
Eigen::Index cholesky_upper(M& a) {
  using T = typename M::Scalar;
  const Eigen::Index n = a.rows(), panel = cholesky_panel(n);
  thread_local ColMat<T> d, w;  // workspaces, allocated once per thread, not per matrix
  for (Eigen::Index k = 0; k < n; k += panel) {
    const Eigen::Index b = std::min(panel, n - k), rest = n - k - b;
    if (const Eigen::Index failed = factor_diagonal_block(a, k, b, d); failed >= 0) return failed;
    if (rest == 0) continue;
    auto a12 = a.block(k, k + b, b, rest);
    w.resize(rest, b);
    w = a12.transpose();
    d.template triangularView<Eigen::Lower>().adjoint().template solveInPlace<Eigen::OnTheRight>(w);
    a12 = w.transpose();
    a.block(k + b, k + b, rest, rest).template selfadjointView<Eigen::Upper>().rankUpdate(w, T(-1));
  }
  return -1;
}

// A single matrix of at least this order, with more than one thread and outside a parallel region, is
// factored or inverted by fixed blocks of split_block rows or columns spread over the threads
// (cholesky_upper_split, invert_and_multiply_split): a batch already fills the threads one matrix
// each, and these forms are slower on one thread than the kernels above. The blocks do not depend on
// the thread count, so neither do the bits from two threads on.
constexpr Eigen::Index split_block = 64, split_min_order = 256;
// Cholesky's panels are factored on one thread between regions: below this order the split form gains nothing.
constexpr Eigen::Index cholesky_split_min_order = 384;

bool split_single(std::int64_t count, std::int64_t n) {
  // Level 0: a region inside an inactive one (an `if` clause that is false) would make a new team each time.
  return count == 1 && n >= split_min_order && omp_get_max_threads() > 1 && omp_get_level() == 0;
}

// Blocks of split_block over [0, n), the last one shorter.
Eigen::Index split_blocks(Eigen::Index n) { return (n + split_block - 1) / split_block; }

// cholesky_upper with each panel's solve split by rows of the panel and the trailing update by
// columns of the trailing block (a product above the diagonal block, a rank update on it), each
// block a task. The update's later blocks are larger, so they are handed out first.
template <class M>
Eigen::Index cholesky_upper_split(M& a) {
  using T = typename M::Scalar;
  const Eigen::Index n = a.rows(), panel = cholesky_panel(n);
  // The calling thread's workspaces, by reference: inside the region a thread_local names each thread's own.
  thread_local ColMat<T> d_workspace, w_workspace;
  ColMat<T>&d = d_workspace, &w = w_workspace;
  for (Eigen::Index k = 0; k < n; k += panel) {
    const Eigen::Index b = std::min(panel, n - k), rest = n - k - b;
    if (const Eigen::Index failed = factor_diagonal_block(a, k, b, d); failed >= 0) return failed;
    if (rest == 0) continue;
    auto a12 = a.block(k, k + b, b, rest);
    auto a22 = a.block(k + b, k + b, rest, rest);
    w.resize(rest, b);
    const Eigen::Index blocks = split_blocks(rest);
    FirstFailure failure;
#pragma omp parallel
    {
#pragma omp for schedule(static)
      for (Eigen::Index i = 0; i < blocks; ++i)
        failure.run(i, [&] {
          const Eigen::Index r = i * split_block, rows = std::min(split_block, rest - r);
          auto part = w.middleRows(r, rows);
          part = a12.middleCols(r, rows).transpose();
          d.template triangularView<Eigen::Lower>().adjoint().template solveInPlace<Eigen::OnTheRight>(part);
          a12.middleCols(r, rows) = part.transpose();
        });
#pragma omp for schedule(dynamic)
      for (Eigen::Index i = 0; i < blocks; ++i)
        failure.run(blocks + i, [&] {
          const Eigen::Index c = (blocks - 1 - i) * split_block, cols = std::min(split_block, rest - c);
          auto right = w.middleRows(c, cols);
          if (c > 0) a22.block(0, c, c, cols).noalias() -= w.topRows(c) * right.transpose();
          a22.block(c, c, cols, cols).template selfadjointView<Eigen::Upper>().rankUpdate(right, T(-1));
        });
    }
    failure.rethrow();
  }
  return -1;
}

// interleaved_cholesky's contract (interleaved.hpp) for any order, by cholesky_upper (cholesky_upper_split for a
// single large matrix).
void cholesky_by_panels(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                        std::int64_t stride_l, bool lower_only, bool nan_rows, std::int32_t* info) {
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    const bool split = split_single(count, n) && n >= cholesky_split_min_order;
    const auto factor = [&](std::int64_t i) {
      const T* src = static_cast<const T*>(a) + i * stride_a;
      T* dst = static_cast<T*>(l) + i * stride_l;
      if (src != dst) std::copy(src, src + n * n, dst);
      Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> c(dst, n, n);  // = A^T
      Eigen::Index failed = split ? cholesky_upper_split(c) : cholesky_upper(c);
      // NaN passes the positivity test: report the first non-finite pivot the same way, or the
      // failure, whichever comes first.
      for (Eigen::Index j = 0; j < (failed < 0 ? n : failed); ++j)
        if (!std::isfinite(c(j, j))) {
          failed = j;
          break;
        }
      // A's strict upper triangle, cache lines the factorization never touches: zeroing them costs
      // a tenth of its time at order 256, so a caller that reads only the lower triangle skips it.
      if (!lower_only) c.template triangularView<Eigen::StrictlyLower>().setZero();
      if (failed < 0) return;
      info[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(failed + 1);
      if (nan_rows)  // rows failed.. of the row-major factor are columns failed.. of c
        c.rightCols(n - failed).setConstant(std::numeric_limits<T>::quiet_NaN());
    };
    if (split) return factor(0);  // its own parallel regions
    // A workspace that cannot grow raises, not a matrix that is not positive definite (that is in info).
    for_each_matrix(count, n * n * n / 3, [&](NoState&, std::int64_t i) { factor(i); });
  });
}

}  // namespace

void CpuBackend::cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a,
                          void* l, std::int64_t stride_l, bool lower_only, const FactorFailure& failure) {
  if (recording()) return keep([=, this] { cholesky(dtype, count, n, a, stride_a, l, stride_l, lower_only, failure); });
  std::vector<std::int32_t> info(static_cast<std::size_t>(count), 0);
  if (interleaved_order(n))
    interleaved_cholesky(dtype, count, n, a, stride_a, l, stride_l, lower_only, !failure.raise, info.data());
  else cholesky_by_panels(dtype, count, n, a, stride_a, l, stride_l, lower_only, !failure.raise, info.data());
  if (!failure.raise) return;
  const auto first = std::find_if(info.begin(), info.end(), [](std::int32_t minor) { return minor != 0; });
  if (first != info.end()) failure.report(first - info.begin(), *first);
}

namespace {

// Solves op(T) X = B, then op(T)^T Z = X when then_transposed, for one row-major system. Eigen
// solves a row-major B as its transpose, through its matrix kernel; for one or a few right-hand
// sides, vector solves (a column at a time) are faster, and up to 8 a column-major copy of B.
template <class T>
void trsm_one(const TrsmArgs& s, const T* t, T* b) {
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  ConstMapMat<T> L(t, s.n, s.n);
  auto solve = [&](auto& x, bool transpose) {
    if (s.lower && !transpose) L.template triangularView<Eigen::Lower>().solveInPlace(x);
    else if (s.lower) L.transpose().template triangularView<Eigen::Upper>().solveInPlace(x);
    else if (!transpose) L.template triangularView<Eigen::Upper>().solveInPlace(x);
    else L.transpose().template triangularView<Eigen::Lower>().solveInPlace(x);
  };
  auto solve_all = [&](auto& x) {
    solve(x, s.transpose);
    if (s.then_transposed) solve(x, !s.transpose);
  };
  if (s.nrhs == 1) {
    Eigen::Map<Vector> x(b, s.n);
    solve_all(x);
  } else if (s.nrhs <= 3) {
    thread_local Vector x;
    for (std::int64_t j = 0; j < s.nrhs; ++j) {
      Eigen::Map<Vector, 0, Eigen::InnerStride<>> column(b + j, s.n, Eigen::InnerStride<>(s.nrhs));
      x = column;
      solve_all(x);
      column = x;
    }
  } else if (s.nrhs <= 8) {
    thread_local ColMat<T> x;
    MapMat<T> B(b, s.n, s.nrhs);
    x = B;
    solve_all(x);
    B = x;
  } else {
    MapMat<T> B(b, s.n, s.nrhs);
    solve_all(B);
  }
}

}  // namespace

void CpuBackend::trsm(const TrsmArgs& s) {
  if (recording()) return keep([=, this] { trsm(s); });
  if (interleaved_solve(s)) return interleaved_trsm(s);
  visit_float_dtype(s.dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* t = static_cast<const T*>(s.t);
    T* b = static_cast<T*>(s.b);
    // The workspaces of a few right-hand sides may throw: for_each_matrix rethrows the first.
    for_each_matrix(s.count, s.n * s.n * s.nrhs,
                    [&](NoState&, std::int64_t i) { trsm_one<T>(s, t + i * s.stride_t, b + i * s.stride_b); });
  });
}

namespace {

// U^-1 in place for an upper triangular column-major U, as LAPACK's trtri: left to right in
// panels, each panel's rows above its diagonal block from the inverse so far (a triangular
// product, then a solve on the right), then the diagonal block unblocked. n^3/3 flops.
template <class M>
void invert_upper(M& u) {
  using T = typename M::Scalar;
  constexpr Eigen::Index panel = 64;
  const Eigen::Index n = u.rows();
  for (Eigen::Index j = 0; j < n; j += panel) {
    const Eigen::Index b = std::min(panel, n - j);
    auto d = u.block(j, j, b, b);
    if (j > 0) {
      auto x = u.block(0, j, j, b);
      x = u.topLeftCorner(j, j).template triangularView<Eigen::Upper>() * x;  // a product: evaluated first
      d.template triangularView<Eigen::Upper>().template solveInPlace<Eigen::OnTheRight>(x);
      x = -x;
    }
    for (Eigen::Index c = 0; c < b; ++c) {
      d(c, c) = T(1) / d(c, c);
      if (c == 0) continue;
      auto column = d.col(c).head(c);
      column = d.topLeftCorner(c, c).template triangularView<Eigen::Upper>() * column;
      column *= -d(c, c);
    }
  }
}

// out = W W^T for an upper triangular column-major W (LAPACK's lauum): panel j of W's columns,
// nonzero in its first j + b rows only, adds a rank-b term to that leading block of the upper
// triangle, n^3/3 flops in all; then the lower triangle mirrors the upper one.
template <class M, class O>
void upper_times_transpose(const M& w, O& out) {
  using T = typename M::Scalar;
  constexpr Eigen::Index panel = 64;
  const Eigen::Index n = w.rows();
  out.setZero();
  for (Eigen::Index j = 0; j < n; j += panel) {
    const Eigen::Index e = std::min(j + panel, n);
    out.topLeftCorner(e, e).template selfadjointView<Eigen::Upper>().rankUpdate(w.block(0, j, e, e - j), T(1));
  }
  out.template triangularView<Eigen::StrictlyLower>() = out.transpose();
}

// out = U^-1 U^-T for an upper triangular column-major U (out may be U's storage) by blocks of
// split_block columns, each a task: first V = U^-1's columns c0.. c1 by a triangular solve of
// U's leading c1 x c1 block against the identity's columns (back substitution that starts at row
// c1: the flops of invert_upper), then out's columns c0.. c1 above and on the diagonal, V's rows
// times V's rows c0.. c1 from column c0 on (V is upper triangular; the flops of
// upper_times_transpose), each block mirrored below the diagonal by the task that wrote it.
template <class M, class O>
void invert_and_multiply_split(const M& u, O& out) {
  using T = typename M::Scalar;
  const Eigen::Index n = u.rows(), blocks = split_blocks(n);
  thread_local ColMat<T> workspace;
  ColMat<T>& v = workspace;  // the calling thread's: inside the region a thread_local names each thread's own
  v.resize(n, n);
  FirstFailure failure;
#pragma omp parallel
  {
#pragma omp for schedule(dynamic)
    for (Eigen::Index i = 0; i < blocks; ++i)
      failure.run(i, [&] {
        const Eigen::Index c0 = (blocks - 1 - i) * split_block, c1 = std::min(c0 + split_block, n);
        auto x = v.middleCols(c0, c1 - c0);
        x.setZero();
        x.middleRows(c0, c1 - c0).setIdentity();
        auto top = x.topRows(c1);
        u.topLeftCorner(c1, c1).template triangularView<Eigen::Upper>().solveInPlace(top);
      });
#pragma omp for schedule(dynamic)
    for (Eigen::Index i = 0; i < blocks; ++i)
      failure.run(blocks + i, [&] {
        const Eigen::Index c0 = i * split_block, b = std::min(split_block, n - c0);
        const auto rows = v.block(c0, c0, b, n - c0);
        if (c0 > 0) {
          auto above = out.block(0, c0, c0, b);
          above.noalias() = v.block(0, c0, c0, n - c0) * rows.transpose();
          out.block(c0, 0, b, c0) = above.transpose();
        }
        auto diagonal = out.block(c0, c0, b, b);
        diagonal.setZero();
        diagonal.template selfadjointView<Eigen::Upper>().rankUpdate(rows, T(1));
        diagonal.template triangularView<Eigen::StrictlyLower>() = diagonal.transpose();
      });
  }
  failure.rethrow();
}

}  // namespace

void CpuBackend::cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                                  void* out, std::int64_t stride_out) {
  if (recording()) return keep([=, this] { cholesky_inverse(dtype, count, n, l, stride_l, out, stride_out); });
  if (interleaved_order(n)) return interleaved_cholesky_inverse(dtype, count, n, l, stride_l, out, stride_out);
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    if (split_single(count, n)) {
      // The row-major L seen column-major is U = L^T, and (L L^T)^-1 = U^-1 U^-T.
      const Eigen::Map<const ColMat<T>> u(static_cast<const T*>(l), n, n);
      Eigen::Map<ColMat<T>> o(static_cast<T*>(out), n, n);
      return invert_and_multiply_split(u, o);
    }
    for_each_matrix(count, n * n * n, [&](NoState&, std::int64_t i) {
      // The row-major L seen column-major is U = L^T, and (L L^T)^-1 = U^-1 U^-T.
      thread_local ColMat<T> w;
      w = Eigen::Map<const ColMat<T>>(static_cast<const T*>(l) + i * stride_l, n, n);
      w.template triangularView<Eigen::StrictlyLower>().setZero();
      invert_upper(w);
      Eigen::Map<ColMat<T>> o(static_cast<T*>(out) + i * stride_out, n, n);  // symmetric: either order
      upper_times_transpose(w, o);
    });
  });
}

namespace {

// Murray (2016), "Differentiation of the Cholesky decomposition", algorithms for the reverse mode.
// Unblocked, on one diagonal block: d holds L's block, g its cotangent (lower triangle).
template <class T, class M, class G>
void cholesky_backward_unblocked(const M& d, G g) {
  const Eigen::Index nb = d.rows();
  for (Eigen::Index j = nb - 1; j >= 0; --j) {
    const Eigen::Index below = nb - j - 1;
    const T pivot = d(j, j);
    auto c = d.col(j).tail(below);
    auto c_bar = g.col(j).tail(below);
    T& d_bar = g(j, j);
    d_bar -= c.dot(c_bar) / pivot;
    d_bar /= pivot;
    c_bar /= pivot;
    g.row(j).head(j) -= d_bar * d.row(j).head(j);
    g.row(j).head(j).noalias() -= c_bar.transpose() * d.block(j + 1, 0, below, j);
    g.block(j + 1, 0, below, j).noalias() -= c_bar * d.row(j).head(j);
    d_bar /= 2;
  }
}

// Blocked, right to left in panels of `nb` columns: level-3 work outside the diagonal blocks, so
// the whole costs about twice the factorization instead of the ~12x of L^-T Phi(L^T Lbar) L^-1.
template <class T>
void cholesky_backward_one(const ConstMapMat<T>& l, MapMat<T>& g, Eigen::Index nb) {
  const Eigen::Index n = l.rows();
  g.template triangularView<Eigen::StrictlyUpper>().setZero();
  thread_local RowMat<T> sym;  // workspace, allocated once per thread, not per matrix
  sym.resize(nb, nb);
  for (Eigen::Index k = n; k > 0; k -= nb) {
    const Eigen::Index j = std::max<Eigen::Index>(0, k - nb), w = k - j, rest = n - k;
    auto r = l.block(j, 0, w, j);
    auto d = l.block(j, j, w, w);
    auto b = l.block(k, 0, rest, j);
    auto c = l.block(k, j, rest, w);
    auto r_bar = g.block(j, 0, w, j);
    auto d_bar = g.block(j, j, w, w);
    auto b_bar = g.block(k, 0, rest, j);
    auto c_bar = g.block(k, j, rest, w);
    if (rest > 0) {
      d.template triangularView<Eigen::Lower>().template solveInPlace<Eigen::OnTheRight>(c_bar);
      b_bar.noalias() -= c_bar * r;
      sym.topLeftCorner(w, w).noalias() = c_bar.transpose() * c;
      d_bar.template triangularView<Eigen::Lower>() -= sym.topLeftCorner(w, w);
    }
    cholesky_backward_unblocked<T>(d, d_bar);
    if (j > 0) {
      if (rest > 0) r_bar.noalias() -= c_bar.transpose() * b;
      auto s = sym.topLeftCorner(w, w);
      s = d_bar.template triangularView<Eigen::Lower>();
      s.template triangularView<Eigen::StrictlyUpper>() = s.transpose();
      s.diagonal() *= T(2);
      r_bar.noalias() -= s * r;
    }
  }
  // The result T is lower triangular; the symmetric cotangent is (T + T^T) / 2.
  g.template triangularView<Eigen::StrictlyUpper>() = g.transpose();
  g *= T(0.5);
  g.diagonal() *= T(2);
}

}  // namespace

void CpuBackend::cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l,
                                   std::int64_t stride_l, void* g, std::int64_t stride_g) {
  if (recording()) return keep([=, this] { cholesky_backward(dtype, count, n, l, stride_l, g, stride_g); });
  if (interleaved_order(n)) return interleaved_cholesky_backward(dtype, count, n, l, stride_l, g, stride_g);
  visit_float_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    const Eigen::Index nb = n > 64 ? 64 : std::max<Eigen::Index>(n, 1);
    for_each_matrix(count, n * n * n, [&](NoState&, std::int64_t i) {
      ConstMapMat<T> li(static_cast<const T*>(l) + i * stride_l, n, n);
      MapMat<T> gi(static_cast<T*>(g) + i * stride_g, n, n);
      cholesky_backward_one<T>(li, gi, nb);
    });
  });
}

}  // namespace vt::cpu
