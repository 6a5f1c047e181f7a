#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "../../core/backend.hpp"

namespace vt::cpu {

// The CPU backend: strided loops for maps and reductions, Eigen for the matrix kernels, OpenMP
// across the batch for batched matrix kernels.
class CpuBackend final : public Backend {
 public:
  Device device() const override { return {}; }
  // Memory (allocator.cpp).
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) override;
  void to_host(void* host, const void* src, std::size_t bytes) override;
  void from_host(void* dst, const void* host, std::size_t bytes) override;
  ~CpuBackend() override;
  // A core's L2 (allocator.cpp): jit plans run by chunks of examples that fit it.
  std::size_t chunk_cache_bytes() const override;
  // Maps, copies and reductions (maps.cpp).
  void fill(const View& out, double value) override;
  void copy(const View& in, const View& out) override;
  void unary(UnaryKind kind, const View& in, const View& out) override;
  void binary(BinaryKind kind, const View& a, const View& b, const View& out) override;
  void select(const View& cond, const View& a, const View& b, const View& out) override;
  void reduce(ReduceKind kind, const View& in, const View& out) override;
  void cumsum(const View& in, const View& out, int axis, bool reverse) override;
  // Gathers and scatters along an indexed axis (indexed.cpp).
  void gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
              const IndexFailure& failure) override;
  void scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
               const IndexFailure& failure) override;
  // Matrix kernels (matrix.cpp).
  void gemm(const GemmArgs& args) override;
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, bool lower_only, const FactorFailure& failure) override;
  void trsm(const TrsmArgs& args) override;
  void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l, void* g,
                         std::int64_t stride_g) override;
  void cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                        void* out, std::int64_t stride_out) override;
  // Decompositions (decompositions.cpp).
  void qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a, std::int64_t stride_a,
          void* q, std::int64_t stride_q, void* r, std::int64_t stride_r, const FactorFailure::Report& failed) override;
  void eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
            std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) override;
  // Recording (recording.cpp): a small plan's calls, or a loop body's, are kept, views and all, and made again at each
  // replay, so a replay costs its kernels' work without the ops' (shape rules, views, dispatch) around them.
  bool records(std::int64_t call_bytes, bool repeated) const override;
  bool begin_recording() override;
  std::unique_ptr<Recording> end_recording() override;

 private:
  // Whether the calling thread records now: its calls go to keep(), not to the kernels.
  static bool recording();
  static void keep(std::function<void()> call);
  // Elementwise calls on small views are kept compiled: each operand's element offsets, computed once.
  void keep_copy(const View& in, const View& out);
  void keep_binary(BinaryKind kind, const View& a, const View& b, const View& out);
  void keep_fill(const View& out, double value);
  // Memory allocated while recording is the recording's (freed with it): the calls it keeps may write to it.
  static void keep_memory(void* p);
  static bool kept_memory(void* p);

  // Freed large blocks are kept for reuse by size (allocator.cpp): fresh pages from the OS cost a
  // page fault each, which for batched buffers of 100 MB is as slow as the arithmetic on them.
  std::mutex cache_mutex_;
  std::multimap<std::size_t, void*> cache_;
  std::size_t cached_bytes_ = 0;
};

}  // namespace vt::cpu
