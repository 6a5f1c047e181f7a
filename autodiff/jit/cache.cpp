// The jit cache: one plan per key (argument types, batching, never the batch size), traced and
// built on a miss. Tracing is serialised and marked per thread (tracing()), so that a jitted
// function called during a trace is inlined and the cache's counters stay readable meanwhile.
#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../vmap.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string key_of(const std::vector<Tensor>& inputs) {
  // The scopes a trace's ops read: reductions over all axes exclude the batch per example, and a vmap in a vmap
  // body maps by a loop.
  std::string key = PerExampleScope::active() ? "per-example;" : "";
  if (in_vmap_body()) key += "vmap-body;";
  for (const Tensor& t : inputs) {
    if (!t.defined()) fail("jit: argument is an undefined tensor");
    key += fmt::format("{}:{}:{}:{};", name_of(t.dtype()), to_string(t.device()), t.is_batched() ? "b" : "u",
                       to_string(t.shape()));
  }
  return key;
}

Tensor symbolic_like(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = t.dtype();
  impl->shape = t.shape();
  impl->batched = t.is_batched();
  impl->device = t.device();
  return Tensor(std::move(impl));
}

thread_local int active_traces = 0;

}  // namespace

bool tracing() { return active_traces > 0; }
TracingScope::TracingScope() { ++active_traces; }
TracingScope::~TracingScope() { --active_traces; }

std::shared_ptr<const CacheEntry> JitCache::get(const std::vector<Tensor>& inputs, const Tracer& trace,
                                                bool count_call) {
  const std::string key = key_of(inputs);
  auto cached = [&]() -> std::shared_ptr<const CacheEntry> {  // with mutex_ held
    const auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    if (count_call) ++counters_.cache_hits;
    return it->second;
  };
  {
    std::lock_guard lock(mutex_);
    if (count_call) ++counters_.calls;
    if (auto hit = cached()) return hit;
    if (tracer_ == std::this_thread::get_id())
      fail("jit: the function asks for a plan of its own (compile) while it is being traced");
  }
  // Traces run one at a time, without the cache's lock: the function may read the counters.
  std::lock_guard one_trace(trace_mutex_);
  {
    std::lock_guard lock(mutex_);
    if (auto hit = cached()) return hit;  // another thread traced it meanwhile
    tracer_ = std::this_thread::get_id();
  }
  struct ClearTracer {  // also when the trace throws
    JitCache& cache;
    ~ClearTracer() {
      std::lock_guard lock(cache.mutex_);
      cache.tracer_ = {};
    }
  } clear_tracer{*this};
  std::vector<Tensor> symbolic;
  for (const Tensor& t : inputs) symbolic.push_back(symbolic_like(t));
  const auto t0 = std::chrono::steady_clock::now();
  const Traced traced = [&] {
    TracingScope active;
    IsolatedTrace isolated;
    DeferConstantOps defer;  // ops on constants become steps of the plan, not work now
    return trace(symbolic);
  }();
  const double trace_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  auto entry = std::make_shared<CacheEntry>();
  entry->plan = build_plan(symbolic, traced, entry->summary, options_);
  entry->skeleton = traced.skeleton;
  entry->runs_eagerly = !entry->plan->runs_op_by_op.empty();
  for (const PlanValue& v : entry->plan->values)
    entry->runs_eagerly |= v.kind == PlanValue::Kind::constant && v.constant.impl().tracked;
  std::lock_guard lock(mutex_);
  ++counters_.traces;
  counters_.trace_ms += trace_ms;
  counters_.plan_ms += ms_since(t1);
  entries_.emplace(key, entry);
  return entry;
}

void JitCache::release_memory() {
  std::lock_guard lock(mutex_);
  for (const auto& [key, entry] : entries_) detail::release_memory(*entry->plan);
}

JitCounters JitCache::counters() const {
  std::lock_guard lock(mutex_);
  JitCounters c = counters_;
  for (const auto& [key, entry] : entries_) {
    const PlanRuntimeCounts r = runtime_counts(*entry->plan);
    c.recordings += r.recordings;
    c.replays += r.replayed;
    c.arenas += r.arenas;
    c.chunked_calls += r.chunked_calls;
    c.chunk_examples = std::max<std::int64_t>(c.chunk_examples, r.chunk_examples);
  }
  return c;
}

}  // namespace vt::detail
