/// \file ndarray.h
/// \brief Devices and n-dimensional arrays owned by the runtime.
///
/// An `NDArray` is a cheap, shared handle to a reference-counted `NDArrayNode` that owns a
/// compact row-major buffer (64-byte aligned) and a `KilnArray` view of it. Copies of the
/// handle share the buffer. `raw()` is what generated code receives: a `KilnArray*` that stays
/// valid, at the same address, for as long as any handle to the array lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime/c_runtime_api.h"
#include "kiln/runtime/data_type.h"
#include "kiln/support/object.h"

namespace kiln::runtime {

/// Where memory lives: a KilnDeviceType and an index among devices of that type.
struct Device {
  int32_t type = kKilnCPU;  ///< a KilnDeviceType
  int32_t id = 0;           ///< device index

  /// The host CPU.
  static constexpr Device cpu(int32_t id = 0) { return Device{kKilnCPU, id}; }
  /// "cpu:0", "cuda:1", "opencl:0", or "device_type(N):i" for an unknown type.
  std::string str() const;
  /// The same device in the C ABI's form.
  KilnDevice to_c() const { return KilnDevice{type, id}; }

  bool operator==(const Device& o) const { return type == o.type && id == o.id; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

/// Alignment in bytes of every buffer NDArray::empty allocates.
constexpr size_t kArrayAlignment = 64;

/// The storage behind an NDArray. Created only by NDArray::empty; frees its buffer when the
/// last handle goes away.
class NDArrayNode : public Object {
 public:
  NDArrayNode(std::vector<int64_t> shape, DataType dtype, Device device, void* data, size_t nbytes);
  ~NDArrayNode() override;

  std::vector<int64_t> shape;  ///< extent of each dimension
  DataType dtype;              ///< element type
  Device device;               ///< where `data` lives
  void* data;                  ///< the buffer (never null, even when empty)
  size_t nbytes;               ///< bytes of elements in the buffer
  /// The C view handed to generated code: points into `shape` and `data`; strides NULL.
  mutable KilnArray array;
};

/// A shared handle to an n-dimensional array. Default-constructed handles are undefined.
class NDArray {
 public:
  NDArray() = default;
  /// Wraps an existing node.
  explicit NDArray(Ref<NDArrayNode> node) : node_(std::move(node)) {}

  /// Allocates an uninitialised compact array on `dev` (the CPU, a CUDA or an OpenCL device,
  /// device_api.h). Throws kiln::Error for a negative extent, a void dtype, a size that
  /// overflows, another device, or "no CUDA device: ..." / "no OpenCL device: ..." where it cannot
  /// be used.
  static NDArray empty(std::vector<int64_t> shape, DataType dtype, Device dev = {});

  /// True when this handle refers to an array.
  bool defined() const { return node_.defined(); }
  /// Extent of each dimension.
  const std::vector<int64_t>& shape() const;
  /// Element type.
  DataType dtype() const;
  /// Where the buffer lives.
  Device device() const;
  /// Number of dimensions.
  int32_t ndim() const;
  /// Number of elements (1 for a 0-d array, 0 when any extent is 0).
  int64_t numel() const;
  /// Size of the elements in bytes: numel() * dtype().bytes().
  size_t nbytes() const;
  /// The buffer, 64-byte aligned.
  void* data() const;
  /// The buffer as T*; no check that T matches dtype().
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data());
  }
  /// The array as the C ABI's KilnArray, owned by the node (stable address; strides NULL).
  KilnArray* raw() const;

  /// A copy of the array on device `dev`.
  NDArray to(Device dev) const;
  /// Copies `nbytes` bytes from host memory `src` into the array (on its device); nbytes must
  /// equal this->nbytes().
  void copy_from(const void* src, size_t nbytes) const;
  /// Copies the array into host memory `dst`, which holds `nbytes` bytes; nbytes must equal
  /// this->nbytes().
  void copy_to(void* dst, size_t nbytes) const;

  /// "NDArray(float32, [2, 3], cpu:0)", or "NDArray(undefined)".
  std::string str() const;
  /// The node, for code that needs the keep-alive reference.
  const Ref<NDArrayNode>& node() const { return node_; }

 private:
  const NDArrayNode& get(const char* what) const;

  Ref<NDArrayNode> node_;
};

/// "[2, 3, 4]".
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace kiln::runtime
