// The CPU backend's memory: allocation through a cache of freed blocks, and host transfers (plain
// copies: the CPU's memory is the host's). Why a cache: fresh pages from the OS cost a page fault
// each on first touch, which for batched buffers of 100 MB is as slow as the arithmetic on them,
// and a loop of ops or a jitted plan asks for the same sizes call after call. So freed large
// blocks are kept by size and handed out again; small ones are not cached (malloc is fast enough).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../../core/error.hpp"
#include "cpu_backend.hpp"

namespace vt::cpu {

namespace {
constexpr std::size_t cache_min_block = std::size_t{1} << 16;     // smaller blocks: malloc is fast enough
constexpr std::size_t cache_capacity = std::size_t{1} << 31;      // at most 2 GiB kept for reuse
constexpr std::size_t cache_trim_trigger = std::size_t{1} << 26;  // a miss of 64 MiB or more empties the cache
std::size_t rounded_size(std::size_t bytes) {
  const std::size_t unit = bytes >= cache_min_block ? 4096 : 64;
  return std::max<std::size_t>((bytes + unit - 1) / unit * unit, 64);
}
}  // namespace

void* CpuBackend::allocate(std::size_t bytes) {
  const std::size_t size = rounded_size(bytes);
  if (size >= cache_min_block && !recording()) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(size); it != cache_.end()) {
      void* p = it->second;
      cache_.erase(it);
      cached_bytes_ -= size;
      return p;
    }
  }
  if (size >= cache_trim_trigger) {
    // A new large size means the workload changed (a new batch size, say): hand the cached blocks
    // back rather than hold them beside the new one.
    std::lock_guard lock(cache_mutex_);
    for (auto& [bytes_cached, block] : cache_) std::free(block);
    cache_.clear();
    cached_bytes_ = 0;
  }
  void* p = std::aligned_alloc(64, size);
  if (!p) fail("cpu: out of memory allocating {} bytes", bytes);
  if (recording()) keep_memory(p);  // the recording's calls may write to it at every replay: it frees it
  return p;
}

void CpuBackend::deallocate(void* p, std::size_t bytes) {
  if (recording() && kept_memory(p)) return;
  const std::size_t size = rounded_size(bytes);
  if (size >= cache_min_block) {
    std::lock_guard lock(cache_mutex_);
    if (cached_bytes_ + size <= cache_capacity) {
      cache_.emplace(size, p);
      cached_bytes_ += size;
      return;
    }
  }
  std::free(p);
}

CpuBackend::~CpuBackend() {
  for (auto& [size, p] : cache_) std::free(p);
}

// A recording runs nothing, so a host copy inside one would read or write at the wrong time: the plan runs directly.
void CpuBackend::to_host(void* host, const void* src, std::size_t bytes) {
  if (recording()) fail("cpu: a host copy while recording (the plan runs without recording)");
  std::memcpy(host, src, bytes);
}
void CpuBackend::from_host(void* dst, const void* host, std::size_t bytes) {
  if (recording()) fail("cpu: a host copy while recording (the plan runs without recording)");
  std::memcpy(dst, host, bytes);
}

// sysconf reports 0 or -1 where the C library cannot tell (some containers, other CPUs): 1 MiB, a
// common L2 of a core, then.
std::size_t CpuBackend::chunk_cache_bytes() const {
  static const std::size_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? static_cast<std::size_t>(l2) : std::size_t{1} << 20;
  }();
  return bytes;
}

}  // namespace vt::cpu
