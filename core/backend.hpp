#pragma once
// The narrow interface every backend implements. Ops never call Eigen or CUDA directly: they
// describe their operands as strided views and call one of these kernels once per op, over the
// whole batch. Every kernel takes the batch count and per-example sizes as run-time arguments,
// so a plan compiled once serves every batch size.
//
// The interface is core vocabulary; the implementations (backends/cpu, backends/cuda) and the
// registry that hands them out (backend_for, in backends/registry.cpp) live in backends/.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>

#include "device.hpp"
#include "dtype.hpp"
#include "shape.hpp"
#include "view.hpp"

namespace vt {

// Whether this build has the CUDA backend, and how many CUDA devices the process can use (0 when
// the build has no CUDA, no driver is loaded or no device is present; never raises).
bool built_with_cuda();
int cuda_device_count();

enum class UnaryKind {
  neg,
  exp,
  log,
  log1p,
  sqrt,
  square,
  sin,
  cos,
  tanh,
  abs,
  sign,
  // special functions: the C library's, but digamma, trigamma, sigmoid and softplus are
  // backends/special_math.hpp's (the same scalar code on every backend)
  log10,
  log2,
  exp2,
  exp10,
  expm1,
  erf,
  erfc,
  lgamma,
  digamma,
  trigamma,
  sigmoid,
  softplus,
  // trigonometric and hyperbolic functions and their inverses: the C library's
  tan,
  arcsin,
  arccos,
  arctan,
  sinh,
  cosh,
  arcsinh,
  arccosh,
  arctanh,
  floor,
  ceil,
};
// Comparisons read operands of one dtype (any, bool too) and write bools; the other kinds read and
// write one number dtype.
// pow_base_grad(a, b) is pow's derivative in its base, b a^(b-1), and 0 where b = 0: one pass where
// the composition needs a pow, a subtraction, a product and a select.
// clang-format off
enum class BinaryKind {
  add, sub, mul, div, pow, maximum, less, greater, equal,
  minimum, pow_base_grad, less_equal, greater_equal, not_equal, arctan2,
};
// clang-format on
constexpr bool is_comparison(BinaryKind k) {
  return k == BinaryKind::less || k == BinaryKind::greater || k == BinaryKind::equal || k == BinaryKind::less_equal ||
         k == BinaryKind::greater_equal || k == BinaryKind::not_equal;
}
enum class ReduceKind { sum, max };
// How a scatter combines an update with the element it lands on: sum adds, max keeps the larger
// (a NaN wins, as in reduce), assign overwrites.
enum class ScatterKind { sum, max, assign };

// count independent products C_i = alpha * op(A_i) op(B_i) + beta * C_i of row-major matrices;
// op(A_i) is m x k, op(B_i) is k x n. A stride of 0 reuses one matrix for every i.
struct GemmArgs {
  DType dtype;
  std::int64_t count, m, n, k;
  bool trans_a, trans_b;
  double alpha, beta;
  const void* a;
  std::int64_t stride_a;
  const void* b;
  std::int64_t stride_b;
  void* c;
  std::int64_t stride_c;
  // The caller knows the result C_i is symmetric (op(A_i) op(B_i) is, and so is C_i when beta != 0):
  // a backend may compute one triangle and mirror it (so C_i comes out exactly symmetric), or ignore
  // the flag.
  bool symmetric = false;
  // With symmetric: the caller reads only the lower triangle of each C_i, so a backend may leave the
  // strict upper triangle as it was (unwritten), or ignore the flag.
  bool lower_only = false;
};

// Solves op(T_i) X_i = B_i in place for count row-major systems; T_i is n x n, B_i is n x nrhs.
// With `then_transposed`, solves op(T_i)^T Z_i = X_i next, in the same pass over T_i: a Cholesky
// solve (L L^T)^-1 B reads each factor once.
struct TrsmArgs {
  DType dtype;
  std::int64_t count, n, nrhs;
  bool lower, transpose;
  bool then_transposed;
  const void* t;
  std::int64_t stride_t;
  void* b;
  std::int64_t stride_b;
};

// What a factorization does about a matrix that is not positive definite. `minor` is the order of
// its first leading minor that is not positive definite or whose pivot is not finite (1-based, as
// LAPACK's info).
struct FactorFailure {
  using Report = std::function<void(std::int64_t example, std::int32_t minor)>;
  // The op's error is raised: `report` raises it for the first failing example. A backend calls
  // it before cholesky returns or, where kernels run asynchronously, from raise_deferred(): never
  // after the end of the op (eager) or of the plan (jit) that factored.
  static FactorFailure raising(Report report) {
    // A logic error, not vt::Error: no input can cause it, and this header compiles under nvcc,
    // which cannot take fmt.
    if (!report) throw std::logic_error("cholesky: a raising factorization needs a report (internal error)");
    return {true, std::move(report)};
  }
  // Checked factorizations: the factor's rows from that minor on become NaN; nothing is raised.
  static FactorFailure poisoning() { return {false, nullptr}; }

  bool raise;
  Report report;
};

// The axis a gather reads along or a scatter writes along: `length` elements, `stride` elements
// apart. An index i in [0, length) addresses element i; a negative one addresses length + i when
// `negative_from_end` (numpy), else it is out of range (segment ids), as is any other.
struct IndexedAxis {
  std::int64_t length, stride;
  bool negative_from_end;
};

// What a gather or scatter does about out-of-range indices: nothing is read or written for them,
// and `report(offset, value)` raises the op's error for the first one in memory order, `offset`
// elements into the index view's buffer, whose value is `value`. As with FactorFailure, a backend
// calls it before the kernel returns or, where kernels run asynchronously, from raise_deferred().
struct IndexFailure {
  using Report = std::function<void(std::int64_t offset, std::int64_t value)>;
  Report report;
};

// Bytes of device memory a backend holds for tensors and plans now, and at most so far.
struct MemoryStats {
  bool known = false;  // false where the backend does not track it (the CPU: see the process RSS)
  std::size_t in_use = 0, peak = 0;
};

// Work recorded once and launched again as one unit (on a GPU, a CUDA graph: one launch where a
// plan has dozens of kernels). It reads and writes exactly the memory the recorded calls named.
class Recording {
 public:
  virtual ~Recording() = default;
  // Enqueues the recorded work again. Failures it meets are deferred as the recorded calls' were
  // (FactorFailure), and raised by raise_deferred() on the replaying thread.
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual MemoryStats memory_stats() { return {}; }

  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) = 0;
  // Copies between host memory and this backend's memory (plain memcpy on the CPU).
  virtual void to_host(void* host, const void* src, std::size_t bytes) = 0;
  virtual void from_host(void* dst, const void* host, std::size_t bytes) = 0;

  virtual void fill(const View& out, double value) = 0;
  // out = in, `in` broadcast to out's shape; converts between dtypes.
  virtual void copy(const View& in, const View& out) = 0;
  virtual void unary(UnaryKind kind, const View& in, const View& out) = 0;
  virtual void binary(BinaryKind kind, const View& a, const View& b, const View& out) = 0;
  // out = cond ? a : b; cond is bool, a, b and out of one dtype (any).
  virtual void select(const View& cond, const View& a, const View& b, const View& out) = 0;
  // `out` has in's rank, with size 1 along the reduced axes.
  virtual void reduce(ReduceKind kind, const View& in, const View& out) = 0;
  // out = the running sums of `in` along `axis` (of the views, which have one shape), from the
  // last element back to the first when `reverse` (cumsum's adjoint). Each line is summed in
  // order, in double.
  virtual void cumsum(const View& in, const View& out, int axis, bool reverse) = 0;

  virtual void gemm(const GemmArgs& args) = 0;
  // l_i = the lower Cholesky factor of a_i (reading a_i's lower triangle; l may equal a), strict
  // upper triangle 0. With `lower_only`, the caller reads only l_i's lower triangle, so a backend may
  // leave the strict upper one as it was (or ignore the flag). A matrix that is not positive
  // definite is dealt with as `failure` says.
  virtual void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                        std::int64_t stride_l, bool lower_only, const FactorFailure& failure) = 0;
  virtual void trsm(const TrsmArgs& args) = 0;
  // Reverse mode of the factorization, in place (Murray 2016, blocked): g holds the cotangent of
  // each lower factor L_i on entry and the symmetric cotangent of A_i on exit.
  virtual void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                                 void* g, std::int64_t stride_g) = 0;
  // out_i = (L_i L_i^T)^-1, the whole symmetric matrix, from lower factors L_i (their strict upper
  // triangles are not read); out does not overlap l. The inverse of A_i = L_i L_i^T as LAPACK's
  // potri computes it: about 2n^3/3 flops where solves against the identity take 2n^3.
  virtual void cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                                void* out, std::int64_t stride_out) = 0;

  // Decompositions that cannot fail for finite input but are told what to do with bad input:
  // `failed(example, code)` raises the op's error for the first failing matrix, called (like a
  // raising FactorFailure's report) before the kernel returns or from raise_deferred(). Codes:
  // -1, the matrix has a non-finite entry where the kernel reads; > 0, the solver did not converge
  // (its info). Failed matrices' outputs are unspecified.
  //
  // The reduced QR of count row-major m x n matrices by Householder reflections, with LAPACK's
  // signs (geqrf + orgqr): with k = min(m, n), q_i is m x k with orthonormal columns and r_i is
  // k x n, upper triangular (0 below the diagonal), a_i = q_i r_i.
  virtual void qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a, std::int64_t stride_a,
                  void* q, std::int64_t stride_q, void* r, std::int64_t stride_r,
                  const FactorFailure::Report& failed) = 0;
  // The eigendecomposition of count symmetric n x n matrices, reading only a_i's lower triangle:
  // w_i holds the eigenvalues in ascending order, the columns of the row-major v_i the
  // orthonormal eigenvectors (signs as the solver leaves them), a_i v_i = v_i diag(w_i).
  virtual void eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
                    std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) = 0;

  // Gather along one axis: out[e] = in[e + i(e) * axis.stride] for every element e of out's shape,
  // where `in` and `indices` are views of out's shape (stride 0 along the axes they do not vary
  // over), offsets are taken in each view, and i(e) is indices[e] (int32 or int64) resolved as
  // IndexedAxis says.
  virtual void gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
                      const IndexFailure& failure) = 0;
  // Scatter along one axis: for every element e of updates' shape, out[e + i(e) * axis.stride] is
  // combined with updates[e] as `kind` says; `indices` and `out` are views of updates' shape (out
  // with stride 0 along the index axes, where several updates may land on one element; its other
  // axes and the indexed one address distinct elements, as a tensor's own layout does). Elements
  // no index reaches keep their values. Updates to one element are applied in row-major order of
  // updates' shape on the CPU, so `assign` keeps the last one, on every backend; a backend that
  // adds with atomics (CUDA) may round float sums differently from run to run.
  virtual void scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
                       const IndexFailure& failure) = 0;

  // Raises the error of a failure that an earlier call on this thread deferred (FactorFailure,
  // IndexFailure), waiting only for the work that decides it. Runs after every eager op and at the
  // end of every plan, so it must cost nothing when nothing is pending. Backends that check on the
  // spot need not override it.
  virtual void raise_deferred() {}

  // The bytes of cache that one thread's share of a jit plan's per-example work should fit in (a
  // core's L2): a plan then runs its per-example steps by chunks of examples whose working set is
  // about that size, one parallel region per call, each thread taking the next chunk (see
  // autodiff/jit/execute.cpp). 0: every step runs over the whole batch (a GPU).
  virtual std::size_t chunk_cache_bytes() const { return 0; }

  // Whether jit records a plan whose call touches `call_bytes` (its arena, arguments and results at
  // the call's batch size) once per batch size and replays it: a GPU records every plan (one graph
  // launch instead of a launch per step), the CPU small ones (its calls without the ops around
  // them) and those `repeated` at every step of a loop, whatever their size. Between begin_recording() and
  // end_recording(), the calling thread's calls are recorded, not run (on a GPU, other threads' calls wait).
  // end_recording() gives the recording, or null where the calls could not be recorded (they did not run either).
  // begin_recording() is false where recording cannot start.
  virtual bool records(std::int64_t call_bytes, bool repeated) const {
    (void)call_bytes;
    (void)repeated;
    return false;
  }
  virtual bool begin_recording() { return false; }
  virtual std::unique_ptr<Recording> end_recording() { return nullptr; }
};

// The backend that owns a device's memory and kernels. Raises vt::Error, naming the device, when it
// is not available (a build without CUDA, no driver, no such device).
Backend& backend_for(Device device);

// Copies `bytes` from `src` on device `from` to `dst` on device `to`: through the host side of
// whichever backend is not the CPU, staged through host memory between two devices.
void copy_bytes(Device to, void* dst, Device from, const void* src, std::size_t bytes);

// backend_for(device).memory_stats(): on a GPU, the bytes its memory pool has handed out.
inline MemoryStats memory_stats(Device device) { return backend_for(device).memory_stats(); }

// Routes a device to another backend from now on (nullptr restores the built-in one). The tests
// use it to run the device-placement logic on CPUs through a stand-in whose memory the host
// cannot read; it is not meant to be called while other threads run ops.
void register_backend(Device device, Backend* backend);

}  // namespace vt
