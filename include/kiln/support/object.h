/// \file object.h
/// \brief Intrusively reference-counted immutable objects and their handles.
///
/// Every shared compiler object (IR nodes, tensors, operations, schedules) derives from
/// `Object`. A `Ref<T>` is a small handle that holds one reference. Objects are immutable once
/// published: passes never modify a node in place, they build new ones.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <utility>

namespace kiln {

/// Base of every reference-counted object. The count is atomic: handles may cross threads.
class Object {
 public:
  Object() = default;
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
  virtual ~Object() = default;

  void inc_ref() const { ref_count_.fetch_add(1, std::memory_order_relaxed); }
  void dec_ref() const {
    if (ref_count_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  int32_t use_count() const { return ref_count_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<int32_t> ref_count_{0};
};

/// A strong handle to an Object subclass. Copying adds a reference; null is allowed.
template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}  // NOLINT(runtime/explicit)
  explicit Ref(const T* p) : ptr_(p) {
    if (ptr_) ptr_->inc_ref();
  }
  Ref(const Ref& o) : ptr_(o.ptr_) {
    if (ptr_) ptr_->inc_ref();
  }
  Ref(Ref&& o) noexcept : ptr_(o.ptr_) { o.ptr_ = nullptr; }
  template <typename U, typename = std::enable_if_t<std::is_base_of_v<T, U>>>
  Ref(const Ref<U>& o) : Ref(o.get()) {}  // NOLINT(runtime/explicit)
  ~Ref() {
    if (ptr_) ptr_->dec_ref();
  }
  Ref& operator=(Ref o) noexcept {
    std::swap(ptr_, o.ptr_);
    return *this;
  }

  const T* get() const { return ptr_; }
  const T* operator->() const { return ptr_; }
  const T& operator*() const { return *ptr_; }
  bool defined() const { return ptr_ != nullptr; }
  explicit operator bool() const { return ptr_ != nullptr; }
  /// Identity comparison (same object), not structural equality.
  bool same_as(const Ref& o) const { return ptr_ == o.ptr_; }

  /// Downcast; returns nullptr when the object is not a U.
  template <typename U>
  const U* as() const {
    return dynamic_cast<const U*>(ptr_);
  }

 private:
  const T* ptr_ = nullptr;
};

/// Allocates a new object and returns a handle to it.
template <typename T, typename... Args>
Ref<T> make_object(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

/// Pointer-identity hash/equality for using handles as map keys.
struct RefHash {
  template <typename H>
  size_t operator()(const H& h) const {
    return std::hash<const void*>()(static_cast<const void*>(h.get()));
  }
};
struct RefEq {
  template <typename H>
  bool operator()(const H& a, const H& b) const {
    return a.get() == b.get();
  }
};

}  // namespace kiln
