#pragma once
/// @file
/// Maps and sets keyed by an object's address, held in one array (open addressing, linear probing). Tracing and
/// jit's plan builder keep one entry per recorded op in several of them; a node-based std::unordered_map allocates
/// once per entry, this one once per doubling.
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

namespace vt {

template <class V>
class PointerMap {
 public:
  PointerMap() = default;
  PointerMap(const PointerMap&) = default;
  PointerMap& operator=(const PointerMap&) = default;
  // A map moved from is empty (its size too), and usable.
  PointerMap(PointerMap&& other) noexcept { *this = std::move(other); }
  PointerMap& operator=(PointerMap&& other) noexcept {
    slots_ = std::move(other.slots_);
    size_ = std::exchange(other.size_, 0);
    other.slots_.clear();
    return *this;
  }

  /// The value at `key` and true where it was absent (then set to `value`), else the value there and false.
  /// Inserting may move every value: a pointer into the map is valid until the next insertion.
  std::pair<V*, bool> try_emplace(const void* key, V value = V{}) {
    assert(key != nullptr);  // null marks an empty slot
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& slot = slots_[index_of(key)];
    if (slot.key == key) return {&slot.value, false};
    slot.key = key;
    slot.value = std::move(value);
    ++size_;
    return {&slot.value, true};
  }
  /// Whether `key` was absent (as a set's insert).
  bool insert(const void* key) { return try_emplace(key).second; }
  /// The value at `key`, or null.
  V* find(const void* key) {
    if (size_ == 0) return nullptr;
    Slot& slot = slots_[index_of(key)];
    return slot.key == key ? &slot.value : nullptr;
  }
  const V* find(const void* key) const { return const_cast<PointerMap*>(this)->find(key); }
  /// The value at `key`, which must be there (std::out_of_range otherwise).
  V& at(const void* key) {
    if (V* v = find(key)) return *v;
    throw std::out_of_range("vt::PointerMap::at: no such key");
  }
  const V& at(const void* key) const { return const_cast<PointerMap*>(this)->at(key); }
  bool contains(const void* key) const { return find(key) != nullptr; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Room for `count` entries without growing.
  void reserve(std::size_t count) {
    while (2 * count > slots_.size()) grow();
  }

 private:
  struct Slot {
    const void* key = nullptr;  // null: empty (no object lives at address 0)
    V value{};
  };
  // Where key is, or the empty slot where it would go. Objects are at least 8-byte aligned: the low bits say nothing.
  std::size_t index_of(const void* key) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(key) >> 3) * 0x9e3779b97f4a7c15ull >>
                                             (64 - std::countr_zero(slots_.size())));
    while (slots_[i].key != nullptr && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> old(slots_.empty() ? 32 : 2 * slots_.size());
    old.swap(slots_);
    for (Slot& s : old)
      if (s.key != nullptr) {
        Slot& to = slots_[index_of(s.key)];
        to.key = s.key;
        to.value = std::move(s.value);
      }
  }
  std::vector<Slot> slots_;  // a power of two of them, at most half full
  std::size_t size_ = 0;
};

/// A set of addresses.
using PointerSet = PointerMap<bool>;

}  // namespace vt
