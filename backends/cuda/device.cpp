// CUDA backend, device side: devices, the memory pool, transfers, maps and reductions.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "../../core/error.hpp"
#include "../merged_axes.hpp"
#include "../view_checks.hpp"
#include "cuda_backend.hpp"
#include "element_steps.hpp"
#include "kernels.hpp"
#include "layout_of.hpp"

namespace vt::cuda {

namespace {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for a query
    return 0;
  }
  return count;
}

Backend& backend(int index) {
  static std::mutex mutex;
  static auto* backends = new std::map<int, CudaBackend*>;  // never destroyed: tensors may outlive statics
  std::lock_guard lock(mutex);
  if (auto it = backends->find(index); it != backends->end()) return *it->second;
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    fail("cuda:{} is not available: {} ({})", index, cudaGetErrorString(e), cudaGetErrorName(e));
  }
  if (index >= count) fail("cuda:{} is not available: this machine has {} CUDA device(s)", index, count);
  auto* created = new CudaBackend(index);
  backends->emplace(index, created);
  return *created;
}

std::string gib(std::size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

CudaBackend::CudaBackend(int index) : index_(index) {
  try {
    initialize();
  } catch (...) {  // release what was created before the failure
    if (syevj_params_) cusolverDnDestroySyevjInfo(syevj_params_);
    if (solver_params_) cusolverDnDestroyParams(solver_params_);
    if (solver_) cusolverDnDestroy(solver_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
    throw;
  }
}

void CudaBackend::initialize() {
  auto entered = enter();
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
  check(cublasCreate(&blas_), "creating the cuBLAS handle");
  check(cublasSetStream(blas_, stream_), "setting the cuBLAS stream");
  check(cusolverDnCreate(&solver_), "creating the cuSOLVER handle");
  check(cusolverDnSetStream(solver_, stream_), "setting the cuSOLVER stream");
  check(cusolverDnCreateParams(&solver_params_), "creating the cuSOLVER parameters");
  check(cusolverDnCreateSyevjInfo(&syevj_params_), "creating the syevj parameters");
  check(cusolverDnXsyevjSetSortEig(syevj_params_, 1), "setting syevj's eigenvalue order");
  check(cudaDeviceGetDefaultMemPool(&pool_, index_), "getting the memory pool");
  // Keep freed memory in the pool instead of returning it to the driver at every synchronisation:
  // a plan allocates the same sizes call after call.
  std::uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "configuring the memory pool");
}

CudaBackend::Entered::Entered(std::recursive_mutex& mutex, int device) : lock_(mutex) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = -1;
  }
  if (previous_ == device) {
    previous_ = -1;  // nothing to give back
    return;
  }
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    (void)cudaGetLastError();
    fail("cuda:{}: selecting the device failed: {} ({})", device, cudaGetErrorString(e), cudaGetErrorName(e));
  }
}

CudaBackend::Entered::~Entered() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

CudaBackend::Entered CudaBackend::enter() { return Entered(mutex_, index_); }

void CudaBackend::check(cudaError_t status, const char* what) const {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  fail("cuda:{}: {} failed: {} ({})", index_, what, cudaGetErrorString(status), cudaGetErrorName(status));
}
void CudaBackend::check(cublasStatus_t status, const char* what) const {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cuda:{}: cuBLAS {} failed: {}", index_, what, cublasGetStatusString(status));
}
void CudaBackend::check(cusolverStatus_t status, const char* what) const {
  if (status != CUSOLVER_STATUS_SUCCESS)
    fail("cuda:{}: cuSOLVER {} failed with status {}", index_, what, static_cast<int>(status));
}
void CudaBackend::check(const std::string& launch_error) const {
  if (!launch_error.empty()) fail("cuda:{}: kernel {}", index_, launch_error);
}

void* CudaBackend::allocate(std::size_t bytes) {
  auto entered = enter();
  void* p = nullptr;
  const std::size_t size = bytes == 0 ? 1 : bytes;
  // While recording, memory comes from the graph's own pool (an allocation node); the plain
  // stream-ordered call is the one capture turns into that.
  cudaError_t e = recording_ ? cudaMallocAsync(&p, size, stream_) : cudaMallocFromPoolAsync(&p, size, pool_, stream_);
  if (e == cudaErrorMemoryAllocation && !recording_) {
    // The pool may hold freed blocks of other sizes: hand them back to the driver and retry once.
    (void)cudaGetLastError();
    trim_memory();
    e = cudaMallocFromPoolAsync(&p, size, pool_, stream_);
  }
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) (void)cudaGetLastError();
    fail("cuda:{}: out of device memory allocating {} ({} of {} free)", index_, gib(bytes), gib(free), gib(total));
  }
  check(e, "allocating device memory");
  return p;
}

void CudaBackend::trim_memory() {
  check(cudaStreamSynchronize(stream_), "waiting for the stream before trimming the memory pool");
  check(cudaMemPoolTrimTo(pool_, 0), "trimming the memory pool");
  check(cudaDeviceGraphMemTrim(index_), "trimming the graphs' memory");
}

MemoryStats CudaBackend::memory_stats() {
  auto entered = enter();
  std::uint64_t in_use = 0, peak = 0, graph_in_use = 0, graph_peak = 0;
  check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &in_use), "reading the memory pool's use");
  check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &peak), "reading the memory pool's peak");
  // Recorded plans' scratch lives in the graphs' own memory. Peaks add up: an upper bound.
  check(cudaDeviceGetGraphMemAttribute(index_, cudaGraphMemAttrUsedMemCurrent, &graph_in_use),
        "reading the graphs' memory use");
  check(cudaDeviceGetGraphMemAttribute(index_, cudaGraphMemAttrUsedMemHigh, &graph_peak), "reading the graphs' peak");
  return {true, static_cast<std::size_t>(in_use + graph_in_use), static_cast<std::size_t>(peak + graph_peak)};
}

void CudaBackend::deallocate(void* p, std::size_t) {
  // Called from destructors: never raises. Stream-ordered, so work already enqueued that reads p
  // finishes first. At process exit the runtime may already be gone; nothing is left to free then.
  std::lock_guard lock(mutex_);
  int current = -1;
  const bool switched =
      cudaGetDevice(&current) == cudaSuccess && current != index_ && cudaSetDevice(index_) == cudaSuccess;
  if (cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
  if (switched) (void)cudaSetDevice(current);
  (void)cudaGetLastError();  // whatever failed here must not be blamed on the next kernel
}

// A factorization's info: the first example whose info is not 0 failed at that minor.
void CudaBackend::defer(const FactorFailure& failure, const std::int32_t* device_info, std::int64_t count) {
  defer(
      [report = failure.report](const std::int32_t* info, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i)
          if (info[i] != 0) return report(i, info[i]);
      },
      device_info, count);
}

void CudaBackend::defer(InfoCheck info_check, const std::int32_t* device_info, std::int64_t count) {
  auto entered = enter();
  if (recording_) {  // the graph keeps the info; each replay defers the check (CudaRecording::replay)
    void* kept = nullptr;
    check(cudaMalloc(&kept, static_cast<std::size_t>(count) * sizeof(std::int32_t)),
          "allocating a recorded check's info");
    recording_->checks_.push_back({std::move(info_check), static_cast<std::int32_t*>(kept), count});
    check(cudaMemcpyAsync(kept, device_info, static_cast<std::size_t>(count) * sizeof(std::int32_t),
                          cudaMemcpyDeviceToDevice, stream_),
          "keeping a check's info");
    return;
  }
  Deferred d{std::this_thread::get_id(), std::move(info_check), nullptr, 0, count, nullptr};
  const auto spare =
      std::find_if(spare_pinned_.begin(), spare_pinned_.end(), [&](const auto& p) { return p.second >= count; });
  if (spare != spare_pinned_.end()) {
    d.info = spare->first;
    d.capacity = spare->second;
    spare_pinned_.erase(spare);
  } else {
    d.capacity = std::max<std::int64_t>(count, 1024);
    void* pinned = nullptr;
    check(cudaMallocHost(&pinned, static_cast<std::size_t>(d.capacity) * sizeof(std::int32_t)),
          "allocating pinned memory for a check's info");
    d.info = static_cast<std::int32_t*>(pinned);
  }
  if (!spare_events_.empty()) {
    d.copied = spare_events_.back();
    spare_events_.pop_back();
  } else {
    check(cudaEventCreateWithFlags(&d.copied, cudaEventDisableTiming), "creating an event");
  }
  std::fill(d.info, d.info + count, 0);  // read as "no failure" should the copy below never run
  deferred_.push_back(d);                // from here on raise_deferred() gives the buffer and the event back
  deferred_count_.store(deferred_.size());
  check(cudaMemcpyAsync(d.info, device_info, static_cast<std::size_t>(count) * sizeof(std::int32_t),
                        cudaMemcpyDeviceToHost, stream_),
        "copying a check's info to the host");
  check(cudaEventRecord(d.copied, stream_), "recording an event");
}

void CudaBackend::raise_deferred() {
  if (deferred_count_.load() == 0) return;
  std::vector<Deferred> mine;  // in the order the factorizations ran: the first failure wins
  {
    auto entered = enter();
    const std::thread::id me = std::this_thread::get_id();
    const auto others_end =
        std::stable_partition(deferred_.begin(), deferred_.end(), [&](const Deferred& d) { return d.thread != me; });
    mine.assign(std::make_move_iterator(others_end), std::make_move_iterator(deferred_.end()));
    deferred_.erase(others_end, deferred_.end());
    deferred_count_.store(deferred_.size());
  }
  if (mine.empty()) return;
  // Waiting without the lock: other threads go on enqueueing meanwhile. The infos are kept aside,
  // to be checked in the order the kernels ran (the first failure raises) once the pinned buffers
  // are given back.
  std::vector<std::vector<std::int32_t>> infos;
  cudaError_t failed = cudaSuccess;
  for (const Deferred& d : mine) {
    const cudaError_t e = cudaEventSynchronize(d.copied);
    if (e != cudaSuccess && failed == cudaSuccess) failed = e;
    infos.emplace_back(d.info, d.info + (e == cudaSuccess ? d.count : 0));
  }
  {
    auto entered = enter();
    for (const Deferred& d : mine) {
      spare_pinned_.emplace_back(d.info, d.capacity);
      spare_events_.push_back(d.copied);
    }
  }
  check(failed, "waiting for a factorization or an index check (or an earlier kernel)");
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (!infos[i].empty()) mine[i].check(infos[i].data(), static_cast<std::int64_t>(infos[i].size()));
}

void CudaBackend::to_host(void* host, const void* src, std::size_t bytes) {
  auto entered = enter();
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_), "copying to the host");
  check(cudaStreamSynchronize(stream_), "copying to the host (or an earlier kernel)");
}

void CudaBackend::from_host(void* dst, const void* host, std::size_t bytes) {
  auto entered = enter();
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_), "copying from the host");
  // The host buffer may be freed as soon as this returns.
  check(cudaStreamSynchronize(stream_), "copying from the host (or an earlier kernel)");
}

void CudaBackend::fill(const View& out, double value) {
  auto entered = enter();
  check(kernels::fill(stream_, out.dtype, layout_of<1>("fill", out.shape, {&out.strides}), out.data, value));
}

void CudaBackend::copy(const View& in, const View& out) {
  check_same_rank(in, out, "cuda", "copy");
  auto entered = enter();
  check(kernels::copy(stream_, in.dtype, out.dtype, layout_of<2>("copy", out.shape, {&in.strides, &out.strides}),
                      in.data, out.data));
}

void CudaBackend::unary(UnaryKind kind, const View& in, const View& out) {
  check_same_rank(in, out, "cuda", "unary");
  auto entered = enter();
  check(kernels::unary(stream_, kind, out.dtype, layout_of<2>("unary", out.shape, {&in.strides, &out.strides}), in.data,
                       out.data));
}

void CudaBackend::binary(BinaryKind kind, const View& a, const View& b, const View& out) {
  check_same_rank(a, out, "cuda", "binary");
  check_same_rank(b, out, "cuda", "binary");
  auto entered = enter();
  if (a.dtype != b.dtype)
    fail("cuda binary: {} and {} operands (internal error: the ops promote first)", name_of(a.dtype), name_of(b.dtype));
  // A comparison reads its operands' dtype and writes bools (kernels::binary).
  check(kernels::binary(stream_, kind, a.dtype,
                        layout_of<3>("binary", out.shape, {&a.strides, &b.strides, &out.strides}), a.data, b.data,
                        out.data));
}

void CudaBackend::select(const View& cond, const View& a, const View& b, const View& out) {
  if (cond.dtype != DType::boolean)
    fail("cuda select: a {} condition (internal error: where converts it)", name_of(cond.dtype));
  auto entered = enter();
  check(kernels::select(stream_, out.dtype,
                        layout_of<4>("select", out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides}),
                        cond.data, a.data, b.data, out.data));
}

void CudaBackend::reduce(ReduceKind kind, const View& in, const View& out) {
  check_same_rank(in, out, "cuda", "reduce");
  // The output's elements (kept axes), and for each the reduced axes (size 1 in the output).
  Shape reduced_shape = in.shape;
  for (std::size_t d = 0; d < out.shape.size(); ++d)
    if (out.shape[d] == in.shape[d]) reduced_shape[d] = 1;
  const auto kept = layout_of<2>("reduce", out.shape, {&in.strides, &out.strides});
  const auto reduced = layout_of<1>("reduce", reduced_shape, {&in.strides});
  auto entered = enter();
  std::optional<Scratch> partials;
  if (kept.total == 1 && reduced.total >= kernels::two_pass_min)
    partials.emplace(*this, kernels::two_pass_blocks * sizeof(double));
  check(kernels::reduce(stream_, kind, out.dtype, kept, reduced, in.data, out.data,
                        partials ? static_cast<double*>(partials->data()) : nullptr));
}

void CudaBackend::cumsum(const View& in, const View& out, int axis, bool reverse) {
  check_same_rank(in, out, "cuda", "cumsum");
  const auto a = static_cast<std::size_t>(axis);
  Shape lines = out.shape;  // the first element of every line
  lines[a] = 1;
  auto entered = enter();
  check(kernels::cumsum(stream_, out.dtype, layout_of<2>("cumsum", lines, {&in.strides, &out.strides}), out.shape[a],
                        in.strides[a], out.strides[a], reverse, in.data, out.data));
}

namespace {

// An index check's info (kernels.hpp: bad): the code of the first offending offset, then its
// value, as two int64 read through four int32; all 0 when every index was in range.
InfoCheck index_check(IndexFailure::Report report) {
  return [report](const std::int32_t* info, std::int64_t) {
    std::int64_t bad[2];
    std::memcpy(bad, info, sizeof bad);
    if (bad[0] != 0) report(steps::bad_index_offset(bad[0]), bad[1]);
  };
}

constexpr std::size_t index_check_bytes = 2 * sizeof(std::int64_t);

}  // namespace

void CudaBackend::gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
                         const IndexFailure& failure) {
  check_same_rank(in, out, "cuda", "gather");
  check_same_rank(indices, out, "cuda", "gather");
  const auto l = layout_of<3>("gather", out.shape, {&in.strides, &indices.strides, &out.strides});
  auto entered = enter();
  Scratch bad(*this, index_check_bytes);
  check(cudaMemsetAsync(bad.data(), 0, index_check_bytes, stream_), "clearing an index check");
  check(kernels::gather(stream_, out.dtype, indices.dtype, l, axis, in.data, indices.data, out.data,
                        static_cast<std::int64_t*>(bad.data())));
  // Stream-ordered: `bad` is freed after the copy.
  defer(index_check(failure.report), static_cast<const std::int32_t*>(bad.data()), index_check_bytes / 4);
}

void CudaBackend::scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
                          const IndexFailure& failure) {
  check_same_rank(indices, updates, "cuda", "scatter");
  check_same_rank(out, updates, "cuda", "scatter");
  const auto l = layout_of<3>("scatter", updates.shape, {&updates.strides, &indices.strides, &out.strides});
  auto entered = enter();
  Scratch bad(*this, index_check_bytes);
  check(cudaMemsetAsync(bad.data(), 0, index_check_bytes, stream_), "clearing an index check");
  // assign: one slot per element of out's extent (offsets are not negative), for the winners.
  std::optional<Scratch> winners;
  if (kind == ScatterKind::assign && l.total > 0) {
    std::int64_t extent = 1 + std::max<std::int64_t>(axis.length - 1, 0) * axis.stride;
    for (std::size_t d = 0; d < out.shape.size(); ++d) extent += (out.shape[d] - 1) * out.strides[d];
    const auto bytes = static_cast<std::size_t>(extent) * sizeof(std::int64_t);
    winners.emplace(*this, bytes);
    check(cudaMemsetAsync(winners->data(), 0xFF, bytes, stream_), "clearing a scatter's winners");  // all -1
  }
  check(kernels::scatter(stream_, kind, out.dtype, indices.dtype, l, axis, updates.data, indices.data, out.data,
                         static_cast<std::int64_t*>(bad.data()),
                         winners ? static_cast<std::int64_t*>(winners->data()) : nullptr));
  defer(index_check(failure.report), static_cast<const std::int32_t*>(bad.data()), index_check_bytes / 4);
}

bool CudaBackend::records(std::int64_t, bool) const {
  static const bool enabled = [] {
    const char* setting = std::getenv("VTAPE_CUDA_GRAPHS");
    return !(setting && std::string_view(setting) == "0");
  }();
  return enabled;
}

bool CudaBackend::begin_recording() {
  auto recording = std::make_unique<CudaRecording>(*this);
  mutex_.lock();  // held until end_recording: another thread's work must not join the capture
  try {
    auto entered = enter();
    // Relaxed: calls that are not stream-ordered may run while capturing: a recorded
    // factorization allocates the buffer its info is kept in (cudaMalloc), and cuBLAS and
    // cuSOLVER may allocate workspace on first use.
    if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
      (void)cudaGetLastError();
      mutex_.unlock();
      return false;
    }
  } catch (...) {
    mutex_.unlock();
    throw;
  }
  recording_ = std::move(recording);
  return true;
}

std::unique_ptr<Recording> CudaBackend::end_recording() {
  std::unique_lock held(mutex_, std::adopt_lock);  // the lock begin_recording took
  std::unique_ptr<CudaRecording> recording = std::move(recording_);
  if (!recording) return nullptr;
  auto entered = enter();
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  if (e == cudaSuccess && graph) e = cudaGraphInstantiate(&recording->exec_, graph, 0);
  if (graph) (void)cudaGraphDestroy(graph);
  if (e != cudaSuccess || !recording->exec_) {  // e.g. a call that cannot be captured: run directly
    (void)cudaGetLastError();
    return nullptr;
  }
  return recording;
}

void CudaRecording::replay() {
  auto entered = backend_.enter();
  backend_.check(cudaGraphLaunch(exec_, backend_.stream_), "launching a recorded plan");
  for (const Check& c : checks_) backend_.defer(c.check, c.info, c.count);
}

CudaRecording::~CudaRecording() {
  try {
    auto entered = backend_.enter();
    (void)cudaStreamSynchronize(backend_.stream_);  // a replay may still read the kept info
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    for (const Check& c : checks_) (void)cudaFree(c.info);
    (void)cudaGetLastError();
  } catch (...) {  // at process exit the runtime may be gone: nothing left to free
  }
}

}  // namespace vt::cuda

// The module's entry points, found with dlsym by backends/registry.cpp.
extern "C" VTAPE_CUDA_EXPORT int vtape_cuda_device_count() { return vt::cuda::device_count(); }

extern "C" VTAPE_CUDA_EXPORT vt::Backend* vtape_cuda_backend(int index, char* message, std::size_t capacity) {
  try {
    return &vt::cuda::backend(index);
  } catch (const std::exception& e) {
    std::snprintf(message, capacity, "%s", e.what());
    return nullptr;
  }
}
