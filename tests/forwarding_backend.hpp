#pragma once
// A test device that computes on the CPU: every Backend virtual forwards to the CPU backend, with
// the same memory (host-readable, unlike opaque_device.hpp's). It registers itself for `device`
// while it lives. Tests derive from it and override only what they watch (e.g. gemm, to count
// GEMMs); a new Backend virtual is forwarded here once, for all of them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vtape/vtape.hpp>

namespace vt::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Device device) : device_(device) { register_backend(device, this); }
  ~ForwardingBackend() override { register_backend(device_, nullptr); }
  ForwardingBackend(const ForwardingBackend&) = delete;
  ForwardingBackend& operator=(const ForwardingBackend&) = delete;

  Device device() const override { return device_; }
  MemoryStats memory_stats() override { return cpu().memory_stats(); }
  void* allocate(std::size_t bytes) override { return cpu().allocate(bytes); }
  void deallocate(void* p, std::size_t bytes) override { cpu().deallocate(p, bytes); }
  void to_host(void* host, const void* src, std::size_t bytes) override { cpu().to_host(host, src, bytes); }
  void from_host(void* dst, const void* host, std::size_t bytes) override { cpu().from_host(dst, host, bytes); }
  void fill(const View& out, double value) override { cpu().fill(out, value); }
  void copy(const View& in, const View& out) override { cpu().copy(in, out); }
  void unary(UnaryKind kind, const View& in, const View& out) override { cpu().unary(kind, in, out); }
  void binary(BinaryKind kind, const View& a, const View& b, const View& out) override {
    cpu().binary(kind, a, b, out);
  }
  void select(const View& c, const View& a, const View& b, const View& out) override { cpu().select(c, a, b, out); }
  void reduce(ReduceKind kind, const View& in, const View& out) override { cpu().reduce(kind, in, out); }
  void cumsum(const View& in, const View& out, int axis, bool reverse) override {
    cpu().cumsum(in, out, axis, reverse);
  }
  void gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
              const IndexFailure& failure) override {
    cpu().gather(in, indices, axis, out, failure);
  }
  void scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
               const IndexFailure& failure) override {
    cpu().scatter(kind, updates, indices, axis, out, failure);
  }
  void gemm(const GemmArgs& args) override { cpu().gemm(args); }
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, bool lower_only, const FactorFailure& failure) override {
    cpu().cholesky(dtype, count, n, a, stride_a, l, stride_l, lower_only, failure);
  }
  void trsm(const TrsmArgs& args) override { cpu().trsm(args); }
  void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l, void* g,
                         std::int64_t stride_g) override {
    cpu().cholesky_backward(dtype, count, n, l, stride_l, g, stride_g);
  }
  void cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                        void* out, std::int64_t stride_out) override {
    cpu().cholesky_inverse(dtype, count, n, l, stride_l, out, stride_out);
  }
  void qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a, std::int64_t stride_a,
          void* q, std::int64_t stride_q, void* r, std::int64_t stride_r,
          const FactorFailure::Report& failed) override {
    cpu().qr(dtype, count, m, n, a, stride_a, q, stride_q, r, stride_r, failed);
  }
  void eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
            std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) override {
    cpu().eigh(dtype, count, n, a, stride_a, w, stride_w, v, stride_v, failed);
  }
  void raise_deferred() override { cpu().raise_deferred(); }
  // Not forwarded: jit plans run every step over the whole batch here, one kernel call per step, which
  // is what the tests deriving from this one count (the CPU's chunks would call kernels per chunk,
  // from several threads).
  std::size_t chunk_cache_bytes() const override { return 0; }
  // Recording keeps Backend's defaults (none): the CPU runs every call as it comes.

 protected:
  static Backend& cpu() { return backend_for(Device::cpu()); }

 private:
  Device device_;
};

// A CPU-computing device that counts the bytes it holds, and their peak, and the bytes copied from it to the host.
class MemoryWatcher final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  void to_host(void* host, const void* src, std::size_t bytes) override {
    read += bytes;
    ForwardingBackend::to_host(host, src, bytes);
  }
  void* allocate(std::size_t bytes) override {
    live += bytes;
    peak = std::max(peak, live);
    return ForwardingBackend::allocate(bytes);
  }
  void deallocate(void* p, std::size_t bytes) override {
    live -= bytes;
    ForwardingBackend::deallocate(p, bytes);
  }
  std::size_t live = 0, peak = 0, read = 0;
};

}  // namespace vt::testing
