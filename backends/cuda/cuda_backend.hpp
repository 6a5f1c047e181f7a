#pragma once
// The CUDA backend: one per device, each with its own stream, cuBLAS and cuSOLVER handles, and the
// device's stream-ordered memory pool. Every kernel and library call is enqueued on that stream,
// so calls return before the GPU finishes, and memory freed by a tensor is reused by later work
// on the same stream without a host synchronisation. The host waits only where it needs a
// result: to_host/from_host, and raise_deferred(), which reads a factorization's `info` or a
// gather's or scatter's index check (copied to pinned memory behind an event) once the op or plan
// that ran it has been enqueued whole.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../core/backend.hpp"

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

class CudaBackend;

// Raises the error that `count` values of a kernel's info (copied to the host) report, if any
// (a factorization's failure, an index out of range); all 0 means no failure.
using InfoCheck = std::function<void(const std::int32_t* info, std::int64_t count)>;

// A plan call recorded as a CUDA graph, and the checks (factorizations, indices) made while
// recording: the graph leaves each one's info in `info` (plain device memory, which outlives the
// graph's own), and every replay defers the check anew.
class CudaRecording final : public Recording {
 public:
  explicit CudaRecording(CudaBackend& backend) : backend_(backend) {}
  ~CudaRecording() override;
  CudaRecording(const CudaRecording&) = delete;
  CudaRecording& operator=(const CudaRecording&) = delete;
  void replay() override;

 private:
  friend class CudaBackend;
  struct Check {
    InfoCheck check;
    std::int32_t* info;
    std::int64_t count;
  };
  CudaBackend& backend_;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<Check> checks_;
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
  void cumsum(const View& in, const View& out, int axis, bool reverse) override;
  void gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
              const IndexFailure& failure) override;
  void scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
               const IndexFailure& failure) override;
  void gemm(const GemmArgs& args) override;
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, bool lower_only, const FactorFailure& failure) override;
  void trsm(const TrsmArgs& args) override;
  void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l, void* g,
                         std::int64_t stride_g) override;
  void cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                        void* out, std::int64_t stride_out) override;
  void qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a, std::int64_t stride_a,
          void* q, std::int64_t stride_q, void* r, std::int64_t stride_r, const FactorFailure::Report& failed) override;
  void eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
            std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) override;
  void raise_deferred() override;
  // Plans are recorded as CUDA graphs unless VTAPE_CUDA_GRAPHS=0.
  bool records(std::int64_t call_bytes, bool repeated) const override;
  bool begin_recording() override;
  std::unique_ptr<Recording> end_recording() override;

 private:
  friend class CudaRecording;
  // Holds the backend's lock with its device current on the calling thread; gives the thread back
  // the device it had before.
  class Entered {
   public:
    Entered(std::recursive_mutex& mutex, int device);
    ~Entered();
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;

   private:
    std::unique_lock<std::recursive_mutex> lock_;
    int previous_ = -1;
  };
  // A check whose failures raise (a factorization's, an index check), waiting for its info in
  // pinned memory.
  struct Deferred {
    std::thread::id thread;
    InfoCheck check;
    std::int32_t* info;  // pinned host memory for `capacity` values, given back to spare_pinned_
    std::int64_t capacity;
    std::int64_t count;
    cudaEvent_t copied;
  };

  void initialize();  // the constructor's work: stream, handles, memory pool
  // Waits for the stream, then hands the pool's and the graphs' cached memory back to the driver.
  void trim_memory();
  Entered enter();
  // Runs a cuBLAS/cuSOLVER call; when it could not get workspace, hands the pool's cached memory
  // back to the driver and runs it once more.
  template <class Call>
  auto with_workspace(Call call);
  // Factors l in place (cuSOLVER's upper mode, column-major), leaving info on the device.
  void factor(DType dtype, std::int64_t count, std::int64_t n, void* l, std::int64_t stride_l, std::int32_t* info);
  void defer(const FactorFailure& failure, const std::int32_t* device_info, std::int64_t count);
  // For qr and eigh: device info for count rows x cols matrices at a stride, -1 where one has a
  // non-finite entry, which is then set to 0 so that no solver iterates on it; else 0.
  Scratch screen(DType dtype, std::int64_t count, std::int64_t rows, std::int64_t cols, void* x, std::int64_t stride);
  void defer(InfoCheck check, const std::int32_t* device_info, std::int64_t count);
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
  cusolverDnParams_t solver_params_ = nullptr;
  syevjInfo_t syevj_params_ = nullptr;  // syevjBatched's: default tolerance and sweeps, ascending order
  std::recursive_mutex mutex_;
  std::vector<Deferred> deferred_;
  std::atomic<std::size_t> deferred_count_{0};  // lets raise_deferred() return without the lock
  std::vector<std::pair<std::int32_t*, std::int64_t>> spare_pinned_;
  std::vector<cudaEvent_t> spare_events_;
  // While a thread records (between begin_recording and end_recording, holding mutex_ the whole
  // time), what it enqueues is captured into this graph's recording.
  std::unique_ptr<CudaRecording> recording_;
};

}  // namespace vt::cuda

// The backend is built as a module (libvtape_cuda.so) that libvtape loads on first use of a CUDA
// device, so that CPU-only programs neither load the CUDA libraries nor need them installed.
// Its entry points (device.cpp):
//   int vtape_cuda_device_count();  CUDA devices this process can use; 0 without driver or device
//   vt::Backend* vtape_cuda_backend(int index, char* message, std::size_t capacity);
//     device `index`'s backend, created on first use; null with the reason in `message` when absent
#define VTAPE_CUDA_EXPORT __attribute__((visibility("default")))
