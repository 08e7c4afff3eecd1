// ShardedMap: an unordered map kept as N std::unordered_maps, split by key.
//
// Why: std::unordered_map grows by rehashing every element at once. The
// head's task table holds a million calls under a flood, and each doubling
// at that size took 17-34 ms inside one turn, while the head read no frame
// (docs/benchmarks.md, "Many actors and a million queued calls"). Split in N,
// each part grows on its own at an N-th of that cost. Elements keep their
// addresses, as in std::unordered_map, and iteration visits the parts in turn.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace spotlight::head {

template <class K, class V, size_t N = 64, class Hash = std::hash<K>>
class ShardedMap {
  static_assert(N > 0);
  using Shard = std::unordered_map<K, V, Hash>;

 public:
  using key_type = K;
  using mapped_type = V;
  using value_type = typename Shard::value_type;
  using size_type = size_t;

  template <bool Const>
  class Iter {
    using Owner = std::conditional_t<Const, const ShardedMap, ShardedMap>;
    using Inner = std::conditional_t<Const, typename Shard::const_iterator, typename Shard::iterator>;

   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = typename Shard::value_type;
    using difference_type = std::ptrdiff_t;
    using reference = std::conditional_t<Const, const value_type&, value_type&>;
    using pointer = std::conditional_t<Const, const value_type*, value_type*>;

    Iter() = default;
    Iter(Owner* owner, size_t shard, Inner it) : owner_(owner), shard_(shard), it_(it) { settle(); }
    // iterator -> const_iterator, as the standard containers allow.
    operator Iter<true>() const
      requires(!Const)
    {
      return Iter<true>(owner_, shard_, it_);
    }

    reference operator*() const { return *it_; }
    pointer operator->() const { return &*it_; }
    Iter& operator++() {
      ++it_;
      settle();
      return *this;
    }
    Iter operator++(int) {
      Iter before = *this;
      ++*this;
      return before;
    }
    // Every end() is alike: its inner iterator is not looked at.
    friend bool operator==(const Iter& a, const Iter& b) {
      return a.shard_ == b.shard_ && (a.shard_ == N || a.it_ == b.it_);
    }

   private:
    friend class ShardedMap;
    // Moves past the ends of parts until an element or the map's end.
    void settle() {
      while (shard_ < N && it_ == owner_->shards_[shard_].end()) {
        if (++shard_ < N) it_ = owner_->shards_[shard_].begin();
      }
    }
    Owner* owner_ = nullptr;
    size_t shard_ = N;
    Inner it_{};
  };
  using iterator = Iter<false>;
  using const_iterator = Iter<true>;

  iterator begin() { return iterator(this, 0, shards_[0].begin()); }
  iterator end() { return iterator(this, N, {}); }
  const_iterator begin() const { return const_iterator(this, 0, shards_[0].begin()); }
  const_iterator end() const { return const_iterator(this, N, {}); }

  iterator find(const K& key) {
    const size_t s = shard_of(key);
    auto it = shards_[s].find(key);
    return it == shards_[s].end() ? end() : iterator(this, s, it);
  }
  const_iterator find(const K& key) const {
    const size_t s = shard_of(key);
    auto it = shards_[s].find(key);
    return it == shards_[s].end() ? end() : const_iterator(this, s, it);
  }
  size_t count(const K& key) const { return shards_[shard_of(key)].count(key); }
  V& at(const K& key) { return shards_[shard_of(key)].at(key); }
  V& operator[](const K& key) { return shards_[shard_of(key)][key]; }
  const V& at(const K& key) const { return shards_[shard_of(key)].at(key); }

  template <class... Args>
  std::pair<iterator, bool> try_emplace(const K& key, Args&&... args) {
    const size_t s = shard_of(key);
    auto [it, fresh] = shards_[s].try_emplace(key, std::forward<Args>(args)...);
    return {iterator(this, s, it), fresh};
  }

  // Returns the element after the erased one, like std::unordered_map::erase.
  iterator erase(iterator pos) {
    const size_t s = pos.shard_;
    return iterator(this, s, shards_[s].erase(pos.it_));
  }
  size_t erase(const K& key) { return shards_[shard_of(key)].erase(key); }

  size_t size() const {
    size_t n = 0;
    for (const Shard& s : shards_) n += s.size();
    return n;
  }
  bool empty() const {
    for (const Shard& s : shards_) {
      if (!s.empty()) return false;
    }
    return true;
  }
  void clear() {
    for (Shard& s : shards_) s.clear();
  }
  // Buckets over all parts: a part that grew shows here (tests).
  size_t bucket_count() const {
    size_t n = 0;
    for (const Shard& s : shards_) n += s.bucket_count();
    return n;
  }

 private:
  // Task ids share their high bits (the caller's number) and count up in
  // their low ones; std::hash of an integer is the integer. Runs of
  // 2^kRunBits consecutive keys go to one part, so that a flood of calls fills one
  // part at a time: the parts then grow at different moments, each at an
  // N-th of the cost, and consecutive keys stay in neighbouring buckets of
  // one part (spread over all parts one by one, every insert missed the
  // cache, and the parts all grew within the same frame).
  static constexpr unsigned kRunBits = 10;
  static size_t shard_of(const K& key) {
    return static_cast<size_t>((static_cast<uint64_t>(Hash{}(key)) >> kRunBits) % N);
  }
  std::array<Shard, N> shards_;
};

}  // namespace spotlight::head
