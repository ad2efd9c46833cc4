// A vector that keeps its first N elements inside the object, for the small
// tables of the per-op path. A recorded autograd node has one or two inputs and
// one output in the common case; with its edge, slot and geometry tables
// inline, recording a node is a single allocation instead of one per table
// (Note [The autograd graph]). A reduction's geometry is a few dims long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace strata {

template <typename T, size_t N>
class SmallVec {
 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() = default;
  SmallVec(const SmallVec& o) { append(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(std::move(o)); }
  template <typename It>
  SmallVec(It first, It last) {
    append(first, last);
  }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      destroy();
      take(std::move(o));
    }
    return *this;
  }
  SmallVec(std::initializer_list<T> l) { append(l.begin(), l.end()); }
  SmallVec& operator=(std::initializer_list<T> l) {
    clear();
    append(l.begin(), l.end());
    return *this;
  }
  ~SmallVec() { destroy(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& at(size_t i) { return data_[check(i)]; }
  const T& at(size_t i) const { return data_[check(i)]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  template <typename... A>
  T& emplace_back(A&&... a) {
    if (size_ == cap_) grow(cap_ * 2);
    T* p = new (data_ + size_) T(std::forward<A>(a)...);
    ++size_;
    return *p;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void resize(size_t n) {
    reserve(n);
    while (size_ > n) data_[--size_].~T();
    while (size_ < n) new (data_ + size_++) T();
  }
  void assign(size_t n, const T& v) {
    clear();
    reserve(n);
    while (size_ < n) new (data_ + size_++) T(v);
  }
  template <typename It>
  void append(It first, It last) {
    reserve(size_ + static_cast<size_t>(last - first));
    for (; first != last; ++first) new (data_ + size_++) T(*first);
  }
  void clear() {
    if constexpr (std::is_trivially_destructible_v<T>) {
      size_ = 0;
    } else {
      while (size_ > 0) data_[--size_].~T();
    }
  }

 private:
  bool is_inline() const { return data_ == reinterpret_cast<const T*>(inline_); }
  size_t check(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVec::at");
    return i;
  }
  void grow(size_t n) {
    if (n < 4) n = 4;
    T* p = static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
    for (size_t i = 0; i < size_; ++i) {
      new (p + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    release_heap();
    data_ = p;
    cap_ = static_cast<uint32_t>(n);
  }
  void release_heap() {
    if (!is_inline()) ::operator delete(data_, std::align_val_t(alignof(T)));
  }
  void destroy() {
    clear();
    release_heap();
    data_ = reinterpret_cast<T*>(inline_);
    cap_ = N;
  }
  // Steals o's heap block, or moves its inline elements one by one.
  void take(SmallVec&& o) {
    if (o.is_inline()) {
      for (size_t i = 0; i < o.size_; ++i) new (data_ + i) T(std::move(o.data_[i]));
      size_ = o.size_;
      o.clear();
    } else {
      data_ = o.data_;
      size_ = o.size_;
      cap_ = o.cap_;
      o.data_ = reinterpret_cast<T*>(o.inline_);
      o.size_ = 0;
      o.cap_ = N;
    }
  }

  T* data_ = reinterpret_cast<T*>(inline_);
  uint32_t size_ = 0;
  uint32_t cap_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace strata
