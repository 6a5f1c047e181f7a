#pragma once
// A stand-in device for testing device placement on machines without a GPU: a backend that
// computes with the CPU backend but hands out pointers the host cannot dereference (bit 62 set,
// which makes an x86-64 or AArch64 address non-canonical). Any host code that reads a device
// tensor's memory directly, instead of through its backend, crashes the test instead of passing.
//
// It is also asynchronous, like a GPU stream, so that ordering mistakes fail on CPUs too: every
// kernel is queued, with copies of its arguments, for one worker thread that runs the queue in
// order, and returns at once.
//  - to_host waits for its copy (cudaMemcpy); from_host copies the host buffer before it returns,
//    since the caller may free it as soon as it does.
//  - deallocate is queued too (cudaFreeAsync): kernels queued earlier that read the buffer run first.
//  - cholesky with failure.raise, qr and eigh record the first failing example instead of raising,
//    and gather and scatter the first index out of range; raise_deferred() raises it on the thread that
//    queued the kernel, as the CUDA backend does: an op or plan that forgets to call it loses the
//    error.
//  - it records like the CUDA backend (jit records each plan once per batch size and replays it):
//    while a thread records, its kernels are kept instead of queued, memory it allocates belongs to
//    the recording, and a factorization's failure is deferred anew by every replay. Recording can
//    be turned off, or made to fail as a capture can on a GPU, to exercise the other paths.
//  - an exception thrown by a queued kernel (a bug: the CPU kernels do not raise) would otherwise
//    end the process on the worker. The first one is kept and rethrown by the next to_host or
//    raise_deferred() on any thread, whichever thread queued the kernel.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>
#include <vtape/vtape.hpp>

namespace vt::testing {

class OpaqueDevice final : public Backend {
 public:
  enum class Recording { replays, off, fails };
  explicit OpaqueDevice(Device device, Recording recording = Recording::replays)
      : device_(device), recording_mode_(recording) {
    register_backend(device, this);
  }
  ~OpaqueDevice() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    queued_.notify_all();
    worker_.join();  // the worker empties the queue first: the frees queued by tensors still run
    register_backend(device_, nullptr);
  }
  OpaqueDevice(const OpaqueDevice&) = delete;
  OpaqueDevice& operator=(const OpaqueDevice&) = delete;

  Device device() const override { return device_; }
  void* allocate(std::size_t bytes) override {
    void* p = flip(cpu().allocate(bytes));
    if (Tape* tape = my_recording()) tape->memory.emplace_back(p, bytes);  // lives as long as the recording
    return p;
  }
  void deallocate(void* p, std::size_t bytes) override {
    if (Tape* tape = my_recording())
      for (const auto& [kept, size] : tape->memory)
        if (kept == p) return;  // the recording's own: freed with it
    enqueue([p = flip(p), bytes] { cpu().deallocate(p, bytes); });
  }
  void to_host(void* host, const void* src, std::size_t bytes) override {
    refuse_while_recording("to_host");
    wait_for(enqueue([host, src = flip(src), bytes] { cpu().to_host(host, src, bytes); }));
    if (std::exception_ptr e = take_error()) std::rethrow_exception(e);
  }
  void from_host(void* dst, const void* host, std::size_t bytes) override {
    refuse_while_recording("from_host");
    const auto* h = static_cast<const std::byte*>(host);
    enqueue([dst = flip(dst), staged = std::vector<std::byte>(h, h + bytes)] {
      cpu().from_host(dst, staged.data(), staged.size());
    });
  }
  void fill(const View& out, double value) override {
    enqueue([o = open(out), value] { cpu().fill(o, value); });
  }
  void copy(const View& in, const View& out) override {
    enqueue([i = open(in), o = open(out)] { cpu().copy(i, o); });
  }
  void unary(UnaryKind kind, const View& in, const View& out) override {
    enqueue([kind, i = open(in), o = open(out)] { cpu().unary(kind, i, o); });
  }
  void binary(BinaryKind kind, const View& a, const View& b, const View& out) override {
    enqueue([kind, a = open(a), b = open(b), o = open(out)] { cpu().binary(kind, a, b, o); });
  }
  void select(const View& c, const View& a, const View& b, const View& out) override {
    enqueue([c = open(c), a = open(a), b = open(b), o = open(out)] { cpu().select(c, a, b, o); });
  }
  void reduce(ReduceKind kind, const View& in, const View& out) override {
    enqueue([kind, i = open(in), o = open(out)] { cpu().reduce(kind, i, o); });
  }
  void cumsum(const View& in, const View& out, int axis, bool reverse) override {
    enqueue([i = open(in), o = open(out), axis, reverse] { cpu().cumsum(i, o, axis, reverse); });
  }
  void gemm(const GemmArgs& args) override {
    GemmArgs a = args;
    a.a = flip(a.a);
    a.b = flip(a.b);
    a.c = flip(a.c);
    enqueue([a] { cpu().gemm(a); });
  }
  void cholesky(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* l,
                std::int64_t stride_l, bool lower_only, const FactorFailure& failure) override {
    a = flip(a);
    l = flip(l);
    if (!failure.raise) {  // the CPU kernel fills the failed rows with NaN and reports nothing
      enqueue(
          [=] { cpu().cholesky(dtype, count, n, a, stride_a, l, stride_l, lower_only, FactorFailure::poisoning()); });
      return;
    }
    deferring([=, report = failure.report](Deferred& d) {
      cpu().cholesky(dtype, count, n, a, stride_a, l, stride_l, lower_only,
                     FactorFailure::raising(first_into(d, report)));
    });
  }
  void gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
              const IndexFailure& failure) override {
    deferring([in = open(in), ix = open(indices), axis, o = open(out), report = failure.report](Deferred& d) {
      cpu().gather(in, ix, axis, o, IndexFailure{first_into(d, report)});
    });
  }
  void scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
               const IndexFailure& failure) override {
    deferring([kind, u = open(updates), ix = open(indices), axis, o = open(out), report = failure.report](Deferred& d) {
      cpu().scatter(kind, u, ix, axis, o, IndexFailure{first_into(d, report)});
    });
  }
  void trsm(const TrsmArgs& args) override {
    TrsmArgs a = args;
    a.t = flip(a.t);
    a.b = flip(a.b);
    enqueue([a] { cpu().trsm(a); });
  }
  void cholesky_backward(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l, void* g,
                         std::int64_t stride_g) override {
    enqueue([=, l = flip(l), g = flip(g)] { cpu().cholesky_backward(dtype, count, n, l, stride_l, g, stride_g); });
  }
  void cholesky_inverse(DType dtype, std::int64_t count, std::int64_t n, const void* l, std::int64_t stride_l,
                        void* out, std::int64_t stride_out) override {
    enqueue(
        [=, l = flip(l), out = flip(out)] { cpu().cholesky_inverse(dtype, count, n, l, stride_l, out, stride_out); });
  }

  void qr(DType dtype, std::int64_t count, std::int64_t m, std::int64_t n, const void* a, std::int64_t stride_a,
          void* q, std::int64_t stride_q, void* r, std::int64_t stride_r,
          const FactorFailure::Report& failed) override {
    deferring([=, a = flip(a), q = flip(q), r = flip(r)](Deferred& d) {
      cpu().qr(dtype, count, m, n, a, stride_a, q, stride_q, r, stride_r, first_into(d, failed));
    });
  }
  void eigh(DType dtype, std::int64_t count, std::int64_t n, const void* a, std::int64_t stride_a, void* w,
            std::int64_t stride_w, void* v, std::int64_t stride_v, const FactorFailure::Report& failed) override {
    deferring([=, a = flip(a), w = flip(w), v = flip(v)](Deferred& d) {
      cpu().eigh(dtype, count, n, a, stride_a, w, stride_w, v, stride_v, first_into(d, failed));
    });
  }

  bool records(std::int64_t, bool) const override { return recording_mode_ != Recording::off; }
  // Like the CUDA backend: every step of a plan over the whole batch.
  std::size_t chunk_cache_bytes() const override { return 0; }
  // Each thread records on its own (the CUDA backend makes other threads wait instead).
  bool begin_recording() override {
    std::lock_guard lock(mutex_);
    std::unique_ptr<Tape>& tape = recordings_[std::this_thread::get_id()];
    if (recording_mode_ == Recording::off || tape) return false;
    tape = std::make_unique<Tape>(*this);
    return true;
  }
  std::unique_ptr<vt::Recording> end_recording() override {
    std::unique_ptr<Tape> tape;
    {
      std::lock_guard lock(mutex_);
      const auto it = recordings_.find(std::this_thread::get_id());
      if (it == recordings_.end()) return nullptr;
      tape = std::move(it->second);
      recordings_.erase(it);
    }
    if (recording_mode_ == Recording::fails) return nullptr;  // as a capture that met a call it cannot take
    return tape;
  }
  std::size_t replays() const { return replays_.load(); }

  void raise_deferred() override {
    if (pending_.load() == 0) return;  // runs after every op: one atomic load when nothing can fail
    wait_for(queued_so_far());         // every factorization this thread queued has run
    std::shared_ptr<Deferred> first;
    std::exception_ptr error;
    {
      std::lock_guard lock(mutex_);
      const std::thread::id me = std::this_thread::get_id();
      // Only this thread's records are read: other threads' kernels may still be writing theirs.
      for (const auto& d : deferred_)
        if (d->thread == me && d->error && !first) first = d;  // in the order they were queued
      pending_ -= std::erase_if(deferred_, [&](const auto& d) { return d->thread == me; });
      error = take_error_locked();
    }
    if (error) std::rethrow_exception(error);
    if (first) first->error();  // throws the op's error (NotPositiveDefinite, an index out of range)
  }

 private:
  // A kernel whose failure raises (a factorization, a gather or scatter), queued by `thread`;
  // `error`, set by the kernel when it failed, raises the op's error.
  struct Deferred {
    std::thread::id thread;
    std::function<void()> error;
  };

  // A recording: the kernels, the factorizations' checks, the memory allocated while recording.
  struct Tape final : vt::Recording {
    explicit Tape(OpaqueDevice& device) : device(device) {}
    ~Tape() override {
      for (const auto& [p, bytes] : memory) device.deallocate(p, bytes);  // queued: after every replay
    }
    void replay() override { device.replay(*this); }
    OpaqueDevice& device;
    std::vector<std::function<void()>> tasks;
    std::vector<std::shared_ptr<Deferred>> kept;  // error: the last replay's failure
    std::vector<std::pair<void*, std::size_t>> memory;
  };

  // The recorded kernels queued again; each recorded check becomes this thread's deferred one, filled in
  // by a task queued after them.
  void replay(const Tape& tape) {
    std::vector<std::shared_ptr<Deferred>> checks;
    {
      std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < tape.kept.size(); ++i) {
        checks.push_back(std::make_shared<Deferred>(Deferred{std::this_thread::get_id(), nullptr}));
        deferred_.push_back(checks.back());
        ++pending_;
      }
    }
    for (const auto& task : tape.tasks) enqueue(task);
    enqueue([checks, kept = tape.kept] {
      for (std::size_t i = 0; i < checks.size(); ++i) checks[i]->error = kept[i]->error;
    });
    ++replays_;
  }
  // A recording runs nothing, so a host copy inside one would read or write at the wrong time.
  void refuse_while_recording(const char* what) {
    if (my_recording()) fail("stand-in device: {} while recording", what);
  }
  // The calling thread's recording, if it is recording. Only that thread touches it meanwhile.
  Tape* my_recording() {
    std::lock_guard lock(mutex_);
    return recording_locked();
  }
  Tape* recording_locked() {
    const auto it = recordings_.find(std::this_thread::get_id());
    return it == recordings_.end() ? nullptr : it->second.get();
  }
  // The CPU kernel reports its failure once, after doing all its work (the first failing
  // example, the first index out of range); d keeps it, to be raised by raise_deferred().
  template <class... Args>
  static std::function<void(Args...)> first_into(Deferred& d, std::function<void(Args...)> report) {
    return [&d, report](Args... args) { d.error = [=] { report(args...); }; };
  }
  // Queues kernel(d) for a kernel that may fail, d deferring its error: kept by a recording (each
  // replay defers the check anew, see replay), else recorded for this thread before the kernel
  // runs, so that raise_deferred() on this thread knows to wait for it.
  void deferring(std::function<void(Deferred&)> kernel) {
    if (Tape* tape = my_recording()) {
      auto kept = std::make_shared<Deferred>(Deferred{{}, nullptr});
      tape->kept.push_back(kept);
      tape->tasks.push_back([=] {
        kept->error = nullptr;
        kernel(*kept);
      });
      return;
    }
    auto d = std::make_shared<Deferred>(Deferred{std::this_thread::get_id(), nullptr});
    {
      std::lock_guard lock(mutex_);
      deferred_.push_back(d);
      ++pending_;
    }
    enqueue([=] { kernel(*d); });
  }

  static constexpr std::uintptr_t bit = std::uintptr_t{1} << 62;
  static void* flip(void* p) { return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) ^ bit); }
  static const void* flip(const void* p) { return flip(const_cast<void*>(p)); }
  static View open(View v) {
    v.data = flip(v.data);
    return v;
  }
  static Backend& cpu() { return backend_for(Device::cpu()); }

  // Queues a task (keeps it, on a recording thread); returns its ticket for wait_for.
  std::uint64_t enqueue(std::function<void()> task) {
    std::uint64_t ticket;
    {
      std::lock_guard lock(mutex_);
      if (Tape* tape = recording_locked()) {
        tape->tasks.push_back(std::move(task));
        return enqueued_;
      }
      queue_.push_back(std::move(task));
      ticket = ++enqueued_;
    }
    queued_.notify_one();
    return ticket;
  }
  std::uint64_t queued_so_far() {
    std::lock_guard lock(mutex_);
    return enqueued_;
  }
  // Returns once the task with this ticket and every task before it have run. Waking under the
  // mutex also makes what they wrote visible to this thread.
  void wait_for(std::uint64_t ticket) {
    std::unique_lock lock(mutex_);
    ran_.wait(lock, [&] { return done_ >= ticket; });
  }
  std::exception_ptr take_error_locked() {
    if (error_) --pending_;
    return std::exchange(error_, nullptr);
  }
  std::exception_ptr take_error() {
    if (pending_.load() == 0) return nullptr;
    std::lock_guard lock(mutex_);
    return take_error_locked();
  }

  void work() {
    std::unique_lock lock(mutex_);
    for (std::uint64_t i = 0;; ++i) {
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      // Lag behind the host, as a GPU does, so that a missing wait shows. Sleeping (tens of
      // microseconds in practice) before every fourth task only, keeps the device tests fast.
      if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(2));
      std::exception_ptr failed;
      try {
        task();
      } catch (...) {
        failed = std::current_exception();
      }
      task = nullptr;  // frees a staged host buffer outside the lock
      lock.lock();
      if (failed && !error_) {
        error_ = failed;
        ++pending_;  // so that raise_deferred() looks
      }
      ++done_;
      ran_.notify_all();
    }
  }

  Device device_;
  const Recording recording_mode_;
  std::map<std::thread::id, std::unique_ptr<Tape>> recordings_;  // the threads recording now
  std::atomic<std::size_t> replays_{0};
  std::mutex mutex_;
  std::condition_variable queued_, ran_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t enqueued_ = 0, done_ = 0;  // tickets handed out, tasks run
  bool stopping_ = false;
  std::vector<std::shared_ptr<Deferred>> deferred_;
  std::exception_ptr error_;  // the first exception a task threw, until someone rethrows it
  // Deferred records plus one while error_ is set; changed under mutex_, read without it.
  std::atomic<std::size_t> pending_{0};
  std::thread worker_{[this] { work(); }};  // last: starts once every member it uses exists
};

}  // namespace vt::testing
