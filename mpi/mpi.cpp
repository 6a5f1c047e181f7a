// vtape over MPI: the collectives as ops (shape rule, forward, adjoint), sharding, and the agreement on errors that
// keeps a failing rank from leaving the others waiting.
#include "mpi.hpp"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../core/backend.hpp"
#include "../core/error.hpp"
#include "../core/graph.hpp"
#include "../ops/tangent.hpp"
#include "../ops/batch.hpp"
#include "../ops/creation.hpp"
#include "../ops/elementwise.hpp"
#include "../ops/indexing.hpp"
#include "../ops/layout.hpp"

namespace vt::mpi {

namespace {

struct State {
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  Slice last_shard;  // the slice shard() took last: errors name global examples
                     // with it
  Counters counters;
};
State state;

bool initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

// Collectives need every rank; with one rank (or no MPI) they are the identity and send nothing.
bool communicating() { return state.size > 1 && initialized(); }

void tally(std::int64_t bytes, std::int64_t payload) {
  ++state.counters.collectives;
  state.counters.bytes_sent += bytes;
  state.counters.payload_bytes += payload;
}

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("vt::mpi: {} failed: {}", what, std::string(text, static_cast<std::size_t>(length)));
}

// ------------------------------------------------------------------------- agreement on errors
// Every rank contributes a key to a MIN all-reduce: no failure is the largest key; a failure's key
// orders failures by global example (those that name none after every one that does), then rank.
constexpr std::int64_t no_failure = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t no_example = std::int64_t{1} << 40;

// Raised on every rank once the ranks agreed on a failure, so that no handler agrees again.
struct Agreed {};
struct AgreedError : Error, Agreed {
  using Error::Error;
};
struct AgreedNotPositiveDefinite : NotPositiveDefinite, Agreed {
  using NotPositiveDefinite::NotPositiveDefinite;
};

struct Failure {
  std::int64_t kind = 0;            // 0: vt::Error (or anything else), 1: vt::NotPositiveDefinite
  std::int64_t example = -1;        // reported as batch_index: in the global batch when renamed
  std::int64_t order = no_example;  // the sort key: the global example, no_example when none is known
  std::int64_t minor = 0;
  std::string message;
};

// The local example of a batched call that NotPositiveDefinite names, as its message words it (ops/matrix_batch.cpp),
// renamed as an example of the global batch.
Failure describe(std::exception_ptr error) {
  Failure f;
  try {
    std::rethrow_exception(error);
  } catch (const NotPositiveDefinite& e) {
    f.kind = 1;
    f.minor = e.minor;
    f.example = e.batch_index;
    f.message = e.what();
    // Renamed only when the batch the message names is the slice shard() took last: the global batch and this rank's
    // offset in it are then known (a batch split by the user is not renamed).
    const std::string local = fmt::format("example {} of the batch of ", e.batch_index);
    const std::size_t at = e.batch_index >= 0 ? f.message.find(local) : std::string::npos;
    std::size_t end = at == std::string::npos ? at : at + local.size();
    if (at != std::string::npos)
      while (end < f.message.size() && std::isdigit(static_cast<unsigned char>(f.message[end]))) ++end;
    const std::string local_batch =
        at == std::string::npos ? std::string() : f.message.substr(at + local.size(), end - at - local.size());
    if (!local_batch.empty() && state.last_shard.global > 0 && local_batch == std::to_string(state.last_shard.count)) {
      f.example = f.order = state.last_shard.offset + e.batch_index;
      f.message.replace(at, end - at,
                        fmt::format("example {} of the global batch of {} (rank {}: example {} of its {})", f.example,
                                    state.last_shard.global, state.rank, e.batch_index, local_batch));
    } else {
      f.message += fmt::format(" (on rank {} of {})", state.rank, state.size);
    }
  } catch (const std::exception& e) {
    f.message = fmt::format("{} (on rank {} of {})", e.what(), state.rank, state.size);
  } catch (...) {
    f.message = fmt::format("an exception that is not a std::exception (on rank {} of {})", state.rank, state.size);
  }
  return f;
}

[[noreturn]] void raise(const Failure& f) {
  if (f.kind == 1) throw AgreedNotPositiveDefinite(f.message, static_cast<long>(f.example), static_cast<long>(f.minor));
  throw AgreedError(f.message);
}

// Doubles as int64 keys of the same order (-0 as +0), so that a cotangent's range rides in the status all-reduce (MIN
// of int64 words) and ~key gives the maximum.
std::int64_t order_key(double v) {
  v += 0.0;
  std::int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits < 0 ? bits ^ std::numeric_limits<std::int64_t>::max() : bits;
}
double from_order_key(std::int64_t key) {
  const std::int64_t bits = key < 0 ? key ^ std::numeric_limits<std::int64_t>::max() : key;
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

// One status all-reduce; when some rank failed, the failure with the smallest key is broadcast from its rank and raised
// on every rank. `mine`: this rank's failure, if any. `range`: this rank's {min, max} of a cotangent that must be the
// same on every rank (allreduce's backward); a difference raises on every rank.
void agree(const Failure* mine, const double* range = nullptr) {
  if (!communicating()) {
    if (mine) raise(*mine);
    return;
  }
  const std::int64_t local = mine ? std::min(mine->order, no_example) * state.size + state.rank : no_failure;
  // Always five words, so that any two agreements match (a rank failing before a check meets the others' check); a rank
  // without a range sends the neutral no_failure in its words.
  std::int64_t words[5] = {local, no_failure, no_failure, no_failure, no_failure};
  if (range)
    words[1] = order_key(range[0]), words[2] = ~order_key(range[0]), words[3] = order_key(range[1]),
    words[4] = ~order_key(range[1]);
  std::int64_t agreed[5];
  check(MPI_Allreduce(words, agreed, 5, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce (status)");
  tally(sizeof words, 0);
  const std::int64_t key = agreed[0];
  if (key == no_failure) {
    if (agreed[1] == no_failure) return;  // no rank checked a range
    const double lo[2] = {from_order_key(agreed[1]), from_order_key(~agreed[2])};
    const double hi[2] = {from_order_key(agreed[3]), from_order_key(~agreed[4])};
    const double scale = std::max({std::abs(lo[0]), std::abs(lo[1]), std::abs(hi[0]), std::abs(hi[1])});
    const double tol = std::isfinite(scale) ? 1e-12 * scale : 0.0;
    // Equal ranges (NaN or infinite alike on every rank included) pass.
    const auto same = [&](const double* v) { return v[0] == v[1] || std::abs(v[1] - v[0]) <= tol; };
    if (same(lo) && same(hi)) return;
    // Every rank holds the same words: every rank raises, with no further message.
    throw AgreedError(fmt::format(
        "vt::mpi::allreduce (backward): the cotangent of the all-reduced tensor differs across ranks (its minimum "
        "ranges over [{:.6g}, {:.6g}], its maximum over [{:.6g}, {:.6g}]): the result of a collective "
        "(allreduce, global_sum, global_mean) meets per-example values again without vt::mpi::replicated(); "
        "write e.g. x - vt::mpi::replicated(vt::mpi::global_mean(x)), so that the gradient sums the ranks' parts",
        lo[0], lo[1], hi[0], hi[1]));
  }
  const int winner = static_cast<int>(key % state.size);
  // Only on the error path: the failure's kind, example, minor and message length, then the text.
  std::int64_t head[4] = {0, 0, 0, 0};
  if (state.rank == winner)
    head[0] = mine->kind, head[1] = mine->example, head[2] = mine->minor,
    head[3] = static_cast<std::int64_t>(mine->message.size());
  check(MPI_Bcast(head, 4, MPI_INT64_T, winner, MPI_COMM_WORLD), "MPI_Bcast (error)");
  Failure f{head[0], head[1], no_example, head[2], std::string(static_cast<std::size_t>(head[3]), '\0')};
  if (state.rank == winner) f.message = mine->message;
  check(MPI_Bcast(f.message.data(), static_cast<int>(head[3]), MPI_CHAR, winner, MPI_COMM_WORLD), "MPI_Bcast (error)");
  tally(static_cast<std::int64_t>(sizeof head) + head[3], 0);
  raise(f);
}

MPI_Datatype mpi_type(DType d, const char* op) {
  switch (d) {
    case DType::f64: return MPI_DOUBLE;
    case DType::f32: return MPI_FLOAT;
    default: fail("{}: float32 or float64 tensors only, got {}", op, name_of(d));
  }
}

// The sum over ranks of `count` elements at `data` (host memory), in place.
void sum_in_place(void* data, std::int64_t count, DType dtype) {
  if (count > std::numeric_limits<int>::max())
    fail("vt::mpi::allreduce: {} elements is too many for one message", count);
  check(MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dtype, "vt::mpi::allreduce"), MPI_SUM,
                      MPI_COMM_WORLD),
        "MPI_Allreduce");
  const auto bytes = count * static_cast<std::int64_t>(size_of(dtype));
  tally(bytes, bytes);
}

// ------------------------------------------------------------------------------------- the ops
// allreduce: out = the sum over ranks of the input (unbatched: it runs once per call, never per
// chunk of examples, see allreduce() below). Its kernel first agrees on the status, so that a rank
// that failed earlier in the call is met here rather than waited for.
void allreduce_forward(const KernelArgs& k) {
  k.backend.copy(k.in[0], k.out);
  if (!communicating()) return;
  agree(nullptr);
  const std::int64_t n = numel(k.out.shape);
  if (k.backend.device().kind == DeviceKind::cpu) {
    sum_in_place(k.out.data, n, k.out.dtype);
    return;
  }
  // On a GPU: through the host, simple and obviously right (the payload is a few words).
  std::vector<char> host(static_cast<std::size_t>(n) * size_of(k.out.dtype));
  k.backend.to_host(host.data(), k.out.data, host.size());
  sum_in_place(host.data(), n, k.out.dtype);
  k.backend.from_host(k.out.data, host.data(), host.size());
}

ExampleType float_type(std::span<const ExampleType> in, const Attrs&) { return in[0]; }

// allreduce's backward: the cotangent itself, once the ranks agreed that it is the same on every rank (its minimum and
// maximum, in the status all-reduce). The identity adjoint is right only then; a cotangent that differs means that the
// collective's result met per-example values again without replicated(), and the gradient would be silently wrong.
void same_cotangent_forward(const KernelArgs& k) {
  k.backend.copy(k.in[0], k.out);
  if (!communicating()) return;
  const std::int64_t n = numel(k.out.shape);
  std::vector<char> host(static_cast<std::size_t>(n) * size_of(k.out.dtype));
  k.backend.to_host(host.data(), k.out.data, host.size());
  double range[2] = {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = k.out.dtype == DType::f64 ? reinterpret_cast<const double*>(host.data())[i]
                                               : reinterpret_cast<const float*>(host.data())[i];
    range[0] = std::min(range[0], v), range[1] = std::max(range[1], v);
  }
  agree(nullptr, range);
}

Tensor same_cotangent(const Tensor& g);

const OpDef same_cotangent_op{.name = "mpi_same_cotangent",
                              .inputs = 1,
                              .infer = float_type,
                              .forward = same_cotangent_forward,
                              .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                                            const AdjointContext&) { return std::vector<Tensor>{same_cotangent(g)}; },
                              .tangent = linear_tangent,
                              .collective = true};

Tensor same_cotangent(const Tensor& g) { return apply(same_cotangent_op, {g}); }

const OpDef allreduce_op{.name = "mpi_allreduce",
                         .inputs = 1,
                         .infer = float_type,
                         .forward = allreduce_forward,
                         // The loss is replicated: every rank seeds the same cotangent, which is each rank's part's
                         // (checked: same_cotangent).
                         .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                                       const AdjointContext&) { return std::vector<Tensor>{same_cotangent(g)}; },
                         .tangent = linear_tangent,
                         .collective = true};

const OpDef replicated_op{
    .name = "mpi_replicated",
    .inputs = 1,
    .infer = float_type,
    .forward = [](const KernelArgs& k) { k.backend.copy(k.in[0], k.out); },
    // Each rank holds the part of the cotangent its slice contributes: their sum is the whole.
    .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{allreduce(g.is_batched() ? batch_sum(g) : g)}; },
    .tangent = linear_tangent};

// x / N per example, N the global batch of the slice shard() took last (every rank knows it without a message). Batched
// in and out, so that under jit it runs with the examples (by chunks) and the gradient of global_mean never waits for a
// collective: the backward pass of a call runs by chunks too. Its kernel checks that this rank's batch is that slice's.
Tensor divide_by_global_batch(const Tensor& x);

void divide_by_global_batch_forward(const KernelArgs& k) {
  // One rank holds the whole batch, sharded or not.
  const Slice s = state.size == 1 ? Slice{0, k.whole_batch, k.whole_batch} : state.last_shard;
  if (k.whole_batch != s.count)
    fail(
        "vt::mpi::global_mean: this rank's batch has {} examples, but the slice vt::mpi::shard took last has {} (of "
        "{}): the global batch size is that shard's; shard the batch (vt::mpi::shard) before the call",
        k.whole_batch, s.count, s.global);
  Storage factor(k.backend.device(), size_of(k.out.dtype));
  const View scalar{k.out.dtype, factor.data, {}, {}};
  k.backend.fill(scalar, 1.0 / static_cast<double>(s.global));
  k.backend.binary(BinaryKind::mul, k.in[0], expand_view(scalar, k.out, false), k.out);
}

const OpDef divide_by_global_batch_op{
    .name = "mpi_divide_by_global_batch",
    .inputs = 1,
    .infer = float_type,
    .forward = divide_by_global_batch_forward,
    .adjoint = [](const Node&, const Tensor&, const Tensor& g,
                  const AdjointContext&) { return std::vector<Tensor>{divide_by_global_batch(g)}; },
    .tangent = linear_tangent,
    .in_place = true};

Tensor divide_by_global_batch(const Tensor& x) { return apply(divide_by_global_batch_op, {x}); }

Tensor check_batched(const Tensor& x, const char* op) {
  if (!x.is_batched())
    fail(
        "{}: the tensor of shape {} is not batched (it reduces over the "
        "global batch)",
        op, to_string(x.shape()));
  return x;
}

}  // namespace

// ------------------------------------------------------------------------------------ sessions
Session::Session(int& argc, char**& argv) { start(&argc, &argv); }
Session::Session() { start(nullptr, nullptr); }

void Session::start(int* argc, char*** argv) {
  if (!initialized()) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    owns_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &state.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &state.size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, state.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &state.local_rank);
  MPI_Comm_size(local, &state.local_size);
  MPI_Comm_free(&local);
  if (!std::getenv("OMP_NUM_THREADS") && state.local_size > 1) {
    // The launcher may bind each rank to some cores (Open MPI binds to one core by default with
    // few ranks): more threads than the rank's affinity mask allows would share those cores.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int bound = std::max(1, omp_get_num_procs());  // the cores of this process's affinity mask
    omp_set_num_threads(std::max(1, std::min(bound, cores / state.local_size)));
  }
}

Session::~Session() {
  // Unwinding from an error on this rank alone (outside call()): MPI_Finalize would wait for the other ranks, which
  // wait in their next collective for this one, and the job would hang. Abort the job instead, so that the launcher
  // ends every rank and reports the failure.
  if (owns_ && initialized() && std::uncaught_exceptions() > 0 && size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  if (owns_ && initialized()) MPI_Finalize();
  if (owns_) state = State{};
}

bool active() { return initialized(); }
int rank() { return state.rank; }
int size() { return state.size; }
int local_rank() { return state.local_rank; }
int local_size() { return state.local_size; }

bool launched() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK") ||
         std::getenv("SLURM_STEP_NUM_TASKS");
}

Device device() {
  const int gpus = cuda_device_count();
  return gpus > 0 ? Device::cuda(state.local_rank % gpus) : Device::cpu();
}

Slice slice(std::int64_t batch, int r) {
  const std::int64_t ranks = state.size, base = batch / ranks, extra = batch % ranks;
  return {r * base + std::min<std::int64_t>(r, extra), base + (r < extra ? 1 : 0), batch};
}

Tensor shard(const Tensor& x) {
  const bool batched = x.is_batched();
  const Tensor plain = batched ? unbatch(x) : x;
  if (plain.ndim() == 0) fail("vt::mpi::shard: a scalar has no leading axis to split across ranks");
  const Slice s = slice(plain.shape(0), state.rank);
  state.last_shard = s;
  const Tensor part = vt::slice(plain, 0, s.offset, s.offset + s.count) + zeros({}, plain.dtype(), plain.device());
  return batched ? as_batch(part) : part;
}

Tensor gather(const Tensor& x) {
  const bool batched = x.is_batched();
  const Tensor plain = batched ? unbatch(x) : x;
  if (plain.ndim() == 0) fail("vt::mpi::gather: a scalar has no leading axis to join across ranks");
  if (!communicating()) return x;
  // A rank that failed earlier in the call meets the others here rather than leaving them waiting.
  agree(nullptr);
  const Tensor host = plain.to(Device::cpu());
  const Shape row_shape(plain.shape().begin() + 1, plain.shape().end());
  const std::int64_t row_bytes = numel(row_shape) * static_cast<std::int64_t>(size_of(plain.dtype()));
  std::int64_t rows = plain.shape(0);
  // Each rank's rows, dtype and row shape (as a hash): every rank sees every rank's, so that a mismatch raises alike on
  // every rank.
  const std::int64_t mine[3] = {rows, static_cast<std::int64_t>(plain.dtype()),
                                static_cast<std::int64_t>(std::hash<std::string>{}(to_string(row_shape)))};
  std::vector<std::int64_t> all(3 * static_cast<std::size_t>(state.size));
  check(MPI_Allgather(mine, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, MPI_COMM_WORLD), "MPI_Allgather");
  tally(sizeof mine, 0);
  std::vector<std::int64_t> all_rows(static_cast<std::size_t>(state.size));
  for (std::size_t r = 0; r < all_rows.size(); ++r) {
    all_rows[r] = all[3 * r];
    if (all[3 * r + 1] != all[1] || all[3 * r + 2] != all[2])
      throw AgreedError(fmt::format(
          "vt::mpi::gather: rank {} holds rows of {} and rank 0 rows of {}{}; every rank must gather rows of the same "
          "shape and dtype",
          r, name_of(static_cast<DType>(all[3 * r + 1])), name_of(static_cast<DType>(all[1])),
          all[3 * r + 2] != all[2] ? ", of another shape" : ""));
  }
  std::vector<int> counts(all_rows.size()), displs(all_rows.size());
  std::int64_t total = 0;
  for (std::size_t r = 0; r < all_rows.size(); ++r) {
    const std::int64_t bytes = all_rows[r] * row_bytes;
    if (total + bytes > std::numeric_limits<int>::max()) fail("vt::mpi::gather: more than 2 GiB in one gather");
    counts[r] = static_cast<int>(bytes);
    displs[r] = static_cast<int>(total);
    total += bytes;
  }
  auto buffer = std::shared_ptr<char[]>(new char[static_cast<std::size_t>(std::max<std::int64_t>(total, 1))]);
  check(MPI_Allgatherv(host.raw_data(), static_cast<int>(rows * row_bytes), MPI_BYTE, buffer.get(), counts.data(),
                       displs.data(), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  tally(rows * row_bytes, rows * row_bytes);
  Shape shape = plain.shape();
  shape[0] = 0;
  for (std::int64_t r : all_rows) shape[0] += r;
  const Tensor joined = Tensor::from_blob(buffer.get(), shape, plain.dtype(), buffer).to(plain.device());
  return batched ? as_batch(joined) : joined;
}

Tensor allreduce(const Tensor& x) {
  if (x.is_batched())
    fail(
        "vt::mpi::allreduce: the tensor of shape {} is batched; reduce over "
        "the batch first (global_sum, "
        "global_mean), so that the sum across ranks runs once per call",
        to_string(x.shape()));
  return apply(allreduce_op, {x});
}

Tensor replicated(const Tensor& x) {
  if (x.is_batched())
    fail(
        "vt::mpi::replicated: the tensor of shape {} is batched: ranks share "
        "unbatched tensors only",
        to_string(x.shape()));
  return apply(replicated_op, {x});
}

Tensor global_sum(const Tensor& x) { return allreduce(batch_sum(check_batched(x, "vt::mpi::global_sum"))); }

// The examples divided by the global batch size (known from shard, no message), then summed: only the sums cross the
// network.
Tensor global_mean(const Tensor& x) {
  return allreduce(batch_sum(divide_by_global_batch(check_batched(x, "vt::mpi::global_mean"))));
}

// The global batch given: no dependence on shard(), and the sum crosses the network before the division.
Tensor global_mean(const Tensor& x, std::int64_t global_batch) {
  if (global_batch <= 0) fail("vt::mpi::global_mean: the global batch size must be positive, got {}", global_batch);
  return allreduce(batch_sum(check_batched(x, "vt::mpi::global_mean"))) * (1.0 / static_cast<double>(global_batch));
}

Counters counters() { return state.counters; }
void reset_counters() { state.counters = {}; }

namespace detail {

void begin_call() {}

void end_call() { agree(nullptr); }

void fail_call(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Agreed&) {
    throw;  // every rank raises it already
  } catch (...) {
  }
  if (!communicating()) std::rethrow_exception(error);  // one rank: the error as it is
  const Failure mine = describe(error);
  agree(&mine);
  std::rethrow_exception(error);  // not reached: agree raised
}

}  // namespace detail

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(same_cotangent_op, "mpi_same_cotangent");
VT_REGISTER_OP(allreduce_op, "mpi_allreduce");
VT_REGISTER_OP(replicated_op, "mpi_replicated");
VT_REGISTER_OP(divide_by_global_batch_op, "mpi_divide_by_global_batch");

}  // namespace vt::mpi
