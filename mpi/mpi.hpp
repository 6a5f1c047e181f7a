#pragma once
/// @file
/// vtape over MPI (optional: built with VTAPE_MPI, library vtape::vtape_mpi, nothing in the core depends on it). The
/// batch is the unit spread across processes: each rank holds a slice of it, runs the same function (the same jitted
/// plan) on its slice, and ranks combine only what the function reduces over the whole batch.
///
///     vt::mpi::Session mpi(argc, argv);                          // MPI_Init; MPI_Finalize at scope exit
///     vt::Tensor P = vt::mpi::shard(vt::as_batch(all_P));        // this rank's examples [b_r, ...]
///     auto step = vt::jit(vt::value_and_grad([&](const vt::Tensor& P) {
///       return vt::mpi::global_mean(vt::vmap(f)(P));             // the mean over the global batch
///     }));
///     auto [value, grad] = vt::mpi::call(step, P);               // errors raised alike on every rank
///
/// The collectives are ops: they trace into jit plans (one plan for every local batch size, an empty slice included)
/// and have adjoints, so that `grad` of a loss every rank holds alike (a replicated loss) is, on every rank, the
/// single-process gradient:
///   - w.r.t. a rank's own slice: its rows of the single-process gradient; they never leave it.
///   - w.r.t. a parameter shared by all ranks: the full gradient, when the parameter enters the sharded computation
///     through replicated(theta) (whose adjoint sums the ranks' parts).
///
/// Errors: an exception on one rank while others wait in a collective would hang them. Every collective first agrees
/// on a status (5 words, 40 bytes), and call(f, ...) ends with one more; a rank that throws joins that agreement from
/// call's handler, and every rank then raises the same error: the one of the lowest failing example of the global
/// batch (NotPositiveDefinite keeps its type, with batch_index the global example index), or else of the lowest
/// failing rank. The global example is known from the slice shard() took last: a message is renamed only when the
/// batch it names has that slice's count; otherwise (data split by the user) it keeps the local index and names the
/// rank. So run every function that uses collectives through call() (or handle errors yourself so that every rank
/// reaches the same collectives).
///
/// Traffic per collective: its payload (the reduced tensor's bytes) plus the 40-byte status; per call() 40 bytes
/// more. counters() counts them.
#include <cstdint>
#include <exception>
#include <type_traits>
#include <utility>

#include "../core/device.hpp"
#include "../core/tensor.hpp"

namespace vt::mpi {

/// Initialises MPI (funneled threads: collectives run on the calling thread
/// only) unless it already is, and finalises it at scope exit if it initialised
/// it. Without OMP_NUM_THREADS in the environment, it sets the OpenMP threads of
/// each rank to the cores over the ranks on this node (at most the cores its affinity mask allows), so ranks sharing a
/// machine do not oversubscribe it. Destroyed while an exception unwinds with more than one rank (an error on this
/// rank alone, outside call()), it aborts the job (MPI_Abort) rather than hang in MPI_Finalize.
class Session {
 public:
  Session(int& argc, char**& argv);
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  void start(int* argc, char*** argv);
  bool owns_ = false;
};

/// Whether MPI is initialised (a Session lives); rank 0 of 1 and size 1
/// otherwise.
bool active();
int rank();
int size();
int local_rank();  ///< among the ranks on this node
int local_size();
/// Whether this process was started by an MPI launcher (mpirun, srun): the
/// environment says so.
bool launched();

/// One rank per GPU: cuda:(local_rank mod GPUs) when CUDA devices are present,
/// else the CPU.
Device device();

/// The even split of `batch` examples across the ranks (the remainder spread
/// over the first ranks: 10 over 3 ranks gives 4, 3, 3): rank r's first example
/// and count.
struct Slice {
  std::int64_t offset = 0, count = 0, global = 0;
};
Slice slice(std::int64_t batch, int rank);

/// This rank's slice of x: of its batch when batched, else of its leading axis
/// (rows), as a copy on x's device. Remembers the slice's offset: errors name
/// examples of the global batch with it.
Tensor shard(const Tensor& x);
/// The global tensor from every rank's slice (batched if x is, else along the
/// leading axis), on every rank. Concrete tensors only (not inside jit).
Tensor gather(const Tensor& x);  ///< agrees on the status first, and on the rows' shape and dtype

/// The sum across ranks of an unbatched tensor (float32 or float64). Adjoint: the identity, right only when the
/// cotangent reaching it is the same on every rank, as it is when the result feeds only replicated values (the loss).
/// The rule: a collective's result (allreduce, global_sum, global_mean) that meets per-example values again must pass
/// through replicated(), so that its gradient sums the ranks' parts:
///
///     x - vt::mpi::replicated(vt::mpi::global_mean(x))    // not x - vt::mpi::global_mean(x)
///
/// The backward pass checks it: the ranks agree on the cotangent's minimum and maximum (4 words of the status
/// all-reduce, whatever the batch), and every rank raises a vt::Error naming this rule if they differ.
Tensor allreduce(const Tensor& x);
/// x itself; its adjoint sums the cotangent across ranks: the gate through which
/// a parameter shared by every rank enters the sharded computation (use theta
/// itself where every rank computes the same thing from it, say a prior, which
/// must not be counted once per rank).
Tensor replicated(const Tensor& x);
/// Sum and mean of a batched tensor over the global batch (every rank's examples), unbatched, the same on every rank.
/// One message each: the sum.
/// global_mean(x) divides by the global batch of the slice shard() took last (no message; its
/// kernel raises if this rank's batch is not that slice's count): data split by the user, without
/// shard(), needs global_mean(x, global_batch), which divides by the given global batch size (a
/// constant of a jitted plan, like any captured value).
Tensor global_sum(const Tensor& x);
Tensor global_mean(const Tensor& x);
Tensor global_mean(const Tensor& x, std::int64_t global_batch);

/// What this process has sent into collectives since it started (or since
/// reset_counters).
struct Counters {
  std::int64_t collectives = 0;    ///< every MPI call, status agreements included
  std::int64_t bytes_sent = 0;     ///< the bytes this rank contributed to them
  std::int64_t payload_bytes = 0;  ///< of which tensors' data (the rest: status words, message lengths)
};
Counters counters();
void reset_counters();

namespace detail {
void begin_call();
// Ends a call() that returned: agrees with the other ranks that every rank's
// call did.
void end_call();
// Ends a call() that raised: agrees on the error and raises the one every rank
// raises.
[[noreturn]] void fail_call(std::exception_ptr error);
}  // namespace detail

/// f(args...) on every rank, raising the same error on every rank if any raised
/// (see above).
template <class F, class... Args>
decltype(auto) call(F&& f, Args&&... args) {
  detail::begin_call();
  try {
    if constexpr (std::is_void_v<decltype(std::forward<F>(f)(std::forward<Args>(args)...))>) {
      std::forward<F>(f)(std::forward<Args>(args)...);
      detail::end_call();
    } else {
      auto result = std::forward<F>(f)(std::forward<Args>(args)...);
      detail::end_call();
      return result;
    }
  } catch (...) {
    detail::fail_call(std::current_exception());
  }
}

}  // namespace vt::mpi
