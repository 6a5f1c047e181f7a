#pragma once
// The CUDA backend: one per device, each with its own stream, cuBLAS and cuSOLVER handles, and the
// device's stream-ordered memory pool. Every kernel and library call is enqueued on that stream,
// so calls return before the GPU finishes, and memory freed by a tensor is reused by later work
// on the same stream without a host synchronisation. The host waits only where it needs a
// result: to_host/from_host, and the factorization's `info` (which decides whether to raise).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <mutex>
#include <string>

#include "../backend.hpp"

namespace vt::cuda {

// Device memory from a backend's pool, returned to it (stream-ordered) when this goes away.
class Scratch {
 public:
  Scratch(Backend& backend, std::size_t bytes) : backend_(&backend), bytes_(bytes), data_(backend.allocate(bytes)) {}
  Scratch(Scratch&& other) noexcept : backend_(other.backend_), bytes_(other.bytes_), data_(other.data_) {
    other.data_ = nullptr;
  }
  ~Scratch() {
    if (data_) backend_->deallocate(data_, bytes_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch& operator=(Scratch&&) = delete;
  void* data() const { return data_; }

 private:
  Backend* backend_;
  std::size_t bytes_;
  void* data_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);
  Device device() const override { return Device::cuda(index_); }
  MemoryStats memory_stats() override;
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  void to_host(void* host, const void* src, std::size_t bytes) override;
  void from_host(void* dst, const void* host, std::size_t bytes) override;
  void fill(const View& out, double value) override;
  void copy(const View& in, const View& out) override;
  void unary(UnaryKind kind, const View& in, const View& out) override;
  void binary(BinaryKind kind, const View& a, const View& b, const View& out) override;
  void select(const View& cond, const View& a, const View& b, const View& out) override;
  void reduce(ReduceKind kind, const View& in, const View& out) override;
  void gemm(const GemmArgs& args) override;
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, std::int32_t* info) override;
  void trsm(const TrsmArgs& args) override;
  void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                         void* g, std::int64_t stride_g) override;

 private:
  void initialize();  // the constructor's work: stream, handles, memory pool
  // Makes this backend's device current on the calling thread and serialises use of the handles.
  std::unique_lock<std::recursive_mutex> enter();
  // Raises vt::Error naming the device and the step when a CUDA, cuBLAS or cuSOLVER call failed.
  void check(cudaError_t status, const char* what) const;
  void check(cublasStatus_t status, const char* what) const;
  void check(cusolverStatus_t status, const char* what) const;
  void check(const std::string& launch_error) const;
  // A device array of count pointers base + i * stride (stride in elements of `dtype`), for the
  // pointer-array (batched) cuBLAS/cuSOLVER calls.
  Scratch pointers(DType dtype, const void* base, std::int64_t stride, std::int64_t count);

  int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  std::recursive_mutex mutex_;
};

}  // namespace vt::cuda

// The backend is built as a module (libvtape_cuda.so) that libvtape loads on first use of a CUDA
// device, so that CPU-only programs neither load the CUDA libraries nor need them installed.
// Its entry points (device.cpp):
//   int vtape_cuda_device_count();  CUDA devices this process can use; 0 without driver or device
//   vt::Backend* vtape_cuda_backend(int index, char* message, std::size_t capacity);
//     device `index`'s backend, created on first use; null with the reason in `message` when absent
#define VTAPE_CUDA_EXPORT __attribute__((visibility("default")))
