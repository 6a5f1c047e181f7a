// CUDA backend, device side: devices, the memory pool, transfers, maps and reductions.
#include <cstdint>
#include <cstdio>
#include <map>

#include "../../core/error.hpp"
#include "../merged_axes.hpp"
#include "cuda_backend.hpp"
#include "kernels.hpp"
#include "layout_of.hpp"

namespace vt::cuda {

namespace {

std::string gib(std::size_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

void same_rank(const View& a, const View& b, const char* kernel) {
  if (a.shape.size() != b.shape.size()) fail("cuda {}: view ranks differ (internal error)", kernel);
}

}  // namespace

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

}  // namespace

CudaBackend::CudaBackend(int index) : index_(index) {
  try {
    initialize();
  } catch (...) {  // release what was created before the failure
    if (solver_) cusolverDnDestroy(solver_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
    throw;
  }
}

void CudaBackend::initialize() {
  check(cudaSetDevice(index_), "selecting the device");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream");
  check(cublasCreate(&blas_), "creating the cuBLAS handle");
  check(cublasSetStream(blas_, stream_), "setting the cuBLAS stream");
  check(cusolverDnCreate(&solver_), "creating the cuSOLVER handle");
  check(cusolverDnSetStream(solver_, stream_), "setting the cuSOLVER stream");
  check(cudaDeviceGetDefaultMemPool(&pool_, index_), "getting the memory pool");
  // Keep freed memory in the pool instead of returning it to the driver at every synchronisation:
  // a plan allocates the same sizes call after call.
  std::uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "configuring the memory pool");
}

std::unique_lock<std::recursive_mutex> CudaBackend::enter() {
  std::unique_lock lock(mutex_);
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) (void)cudaGetLastError();
  if (current != index_) check(cudaSetDevice(index_), "selecting the device");
  return lock;
}

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
  if (status != CUSOLVER_STATUS_SUCCESS) fail("cuda:{}: cuSOLVER {} failed with status {}", index_, what, static_cast<int>(status));
}
void CudaBackend::check(const std::string& launch_error) const {
  if (!launch_error.empty()) fail("cuda:{}: kernel {}", index_, launch_error);
}

void* CudaBackend::allocate(std::size_t bytes) {
  auto lock = enter();
  void* p = nullptr;
  const std::size_t size = bytes == 0 ? 1 : bytes;
  cudaError_t e = cudaMallocFromPoolAsync(&p, size, pool_, stream_);
  if (e == cudaErrorMemoryAllocation) {
    // The pool may hold freed blocks of other sizes: hand them back to the driver and retry once.
    (void)cudaGetLastError();
    check(cudaStreamSynchronize(stream_), "waiting for the stream before trimming the memory pool");
    check(cudaMemPoolTrimTo(pool_, 0), "trimming the memory pool");
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

MemoryStats CudaBackend::memory_stats() {
  auto lock = enter();
  std::uint64_t in_use = 0, peak = 0;
  check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &in_use), "reading the memory pool's use");
  check(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &peak), "reading the memory pool's peak");
  return {true, static_cast<std::size_t>(in_use), static_cast<std::size_t>(peak)};
}

void CudaBackend::deallocate(void* p, std::size_t) {
  // Called from destructors: never raises. Stream-ordered, so work already enqueued that reads p
  // finishes first. At process exit the runtime may already be gone; nothing is left to free then.
  std::lock_guard lock(mutex_);
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != index_) (void)cudaSetDevice(index_);
  if (cudaFreeAsync(p, stream_) != cudaSuccess) (void)cudaGetLastError();
  (void)cudaGetLastError();  // whatever failed here must not be blamed on the next kernel
}

void CudaBackend::to_host(void* host, const void* src, std::size_t bytes) {
  auto lock = enter();
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream_), "copying to the host");
  check(cudaStreamSynchronize(stream_), "copying to the host (or an earlier kernel)");
}

void CudaBackend::from_host(void* dst, const void* host, std::size_t bytes) {
  auto lock = enter();
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_), "copying from the host");
  // The host buffer may be freed as soon as this returns.
  check(cudaStreamSynchronize(stream_), "copying from the host (or an earlier kernel)");
}

void CudaBackend::fill(const View& out, double value) {
  auto lock = enter();
  check(kernels::fill(stream_, out.dtype, layout_of<1>("fill", out.shape, {&out.strides}), out.data, value));
}

void CudaBackend::copy(const View& in, const View& out) {
  same_rank(in, out, "copy");
  auto lock = enter();
  check(kernels::copy(stream_, in.dtype, out.dtype, layout_of<2>("copy", out.shape, {&in.strides, &out.strides}), in.data,
                      out.data));
}

void CudaBackend::unary(UnaryKind kind, const View& in, const View& out) {
  same_rank(in, out, "unary");
  auto lock = enter();
  check(kernels::unary(stream_, kind, out.dtype, layout_of<2>("unary", out.shape, {&in.strides, &out.strides}), in.data,
                       out.data));
}

void CudaBackend::binary(BinaryKind kind, const View& a, const View& b, const View& out) {
  same_rank(a, out, "binary");
  same_rank(b, out, "binary");
  auto lock = enter();
  check(kernels::binary(stream_, kind, out.dtype,
                        layout_of<3>("binary", out.shape, {&a.strides, &b.strides, &out.strides}), a.data, b.data,
                        out.data));
}

void CudaBackend::select(const View& cond, const View& a, const View& b, const View& out) {
  auto lock = enter();
  check(kernels::select(stream_, out.dtype,
                        layout_of<4>("select", out.shape, {&cond.strides, &a.strides, &b.strides, &out.strides}),
                        cond.data, a.data, b.data, out.data));
}

void CudaBackend::reduce(ReduceKind kind, const View& in, const View& out) {
  same_rank(in, out, "reduce");
  // The output's elements (kept axes), and for each the reduced axes (size 1 in the output).
  Shape reduced_shape = in.shape;
  for (std::size_t d = 0; d < out.shape.size(); ++d)
    if (out.shape[d] == in.shape[d]) reduced_shape[d] = 1;
  auto lock = enter();
  check(kernels::reduce(stream_, kind, out.dtype, layout_of<2>("reduce", out.shape, {&in.strides, &out.strides}),
                        layout_of<1>("reduce", reduced_shape, {&in.strides}), in.data, out.data));
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
