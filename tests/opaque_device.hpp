#pragma once
// A stand-in device for testing device placement on machines without a GPU: a backend that
// computes with the CPU backend but hands out pointers the host cannot dereference (bit 62 set,
// which makes an x86-64 or AArch64 address non-canonical). Any host code that reads a device
// tensor's memory directly, instead of through its backend, crashes the test instead of passing.
#include <cstdint>
#include <vtape/vtape.hpp>

namespace vt::testing {

class OpaqueDevice final : public Backend {
 public:
  explicit OpaqueDevice(Device device) : device_(device) { register_backend(device, this); }
  ~OpaqueDevice() override { register_backend(device_, nullptr); }
  OpaqueDevice(const OpaqueDevice&) = delete;
  OpaqueDevice& operator=(const OpaqueDevice&) = delete;

  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override { return flip(cpu().allocate(bytes)); }
  void deallocate(void* p, std::size_t bytes) override { cpu().deallocate(flip(p), bytes); }
  void to_host(void* host, const void* src, std::size_t bytes) override { cpu().to_host(host, flip(src), bytes); }
  void from_host(void* dst, const void* host, std::size_t bytes) override { cpu().from_host(flip(dst), host, bytes); }
  void fill(const View& out, double value) override { cpu().fill(open(out), value); }
  void copy(const View& in, const View& out) override { cpu().copy(open(in), open(out)); }
  void unary(UnaryKind kind, const View& in, const View& out) override { cpu().unary(kind, open(in), open(out)); }
  void binary(BinaryKind kind, const View& a, const View& b, const View& out) override {
    cpu().binary(kind, open(a), open(b), open(out));
  }
  void select(const View& c, const View& a, const View& b, const View& out) override {
    cpu().select(open(c), open(a), open(b), open(out));
  }
  void reduce(ReduceKind kind, const View& in, const View& out) override { cpu().reduce(kind, open(in), open(out)); }
  void gemm(const GemmArgs& args) override {
    GemmArgs a = args;
    a.a = flip(a.a);
    a.b = flip(a.b);
    a.c = flip(a.c);
    cpu().gemm(a);
  }
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, std::int32_t* info) override {
    cpu().cholesky(dtype, count, n, flip(a), stride_a, flip(l), stride_l, info);
  }
  void trsm(const TrsmArgs& args) override {
    TrsmArgs a = args;
    a.t = flip(a.t);
    a.b = flip(a.b);
    cpu().trsm(a);
  }
  void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l, void* g,
                         std::int64_t stride_g) override {
    cpu().cholesky_backward(dtype, count, n, flip(l), stride_l, flip(g), stride_g);
  }

 private:
  static constexpr std::uintptr_t bit = std::uintptr_t{1} << 62;
  static void* flip(void* p) { return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) ^ bit); }
  static const void* flip(const void* p) { return flip(const_cast<void*>(p)); }
  static View open(View v) {
    v.data = flip(v.data);
    return v;
  }
  static Backend& cpu() { return backend_for(Device::cpu()); }
  Device device_;
};

}  // namespace vt::testing
