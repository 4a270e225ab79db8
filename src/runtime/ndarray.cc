// NDArray allocation and copies. NDArray::empty checks the shape (no negative extent, no
// overflow of the element count or byte size) and the dtype, allocates a 64-byte-aligned
// buffer with posix_memalign (rounded up to whole 64-byte lines, at least one line, so even an
// empty array has a valid pointer), and fills the node's KilnArray view (compact row-major,
// strides NULL, byte_offset 0) that generated code reads. Memory on a GPU comes from
// device_api.h (device_alloc); copies between the host and the array's device go through
// device_copy after a size check whose error names both sizes.
#include "kiln/runtime/ndarray.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "kiln/runtime/device_api.h"
#include "kiln/support/error.h"

namespace kiln::runtime {

std::string Device::str() const {
  std::string name;
  switch (type) {
    case kKilnCPU:
      name = "cpu";
      break;
    case kKilnCUDA:
      name = "cuda";
      break;
    case kKilnOpenCL:
      name = "opencl";
      break;
    default:
      name = "device_type(" + std::to_string(type) + ")";
      break;
  }
  return name + ":" + std::to_string(id);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

NDArrayNode::NDArrayNode(std::vector<int64_t> shape_in, DataType dtype_in, Device device_in,
                         void* data_in, size_t nbytes_in)
    : shape(std::move(shape_in)),
      dtype(dtype_in),
      device(device_in),
      data(data_in),
      nbytes(nbytes_in) {
  array.data = data;
  array.device = device.to_c();
  array.ndim = static_cast<int32_t>(shape.size());
  array.dtype = KilnDataType{static_cast<uint8_t>(dtype.code()), static_cast<uint8_t>(dtype.bits()),
                             static_cast<uint16_t>(dtype.lanes())};
  array.shape = shape.data();
  array.strides = nullptr;
  array.byte_offset = 0;
}

NDArrayNode::~NDArrayNode() {
  if (device.type == kKilnCPU) {
    std::free(data);
  } else {
    device_free(device, data);
  }
}

NDArray NDArray::empty(std::vector<int64_t> shape, DataType dtype, Device dev) {
  KILN_USER_CHECK(dev.type == kKilnCPU || dev.type == kKilnCUDA || dev.type == kKilnOpenCL)
      << "NDArray::empty: cannot allocate on device " << dev.str()
      << ": this runtime allocates cpu, cuda and opencl memory";
  KILN_USER_CHECK(!dtype.is_void() && dtype.bits() > 0 && dtype.lanes() > 0)
      << "NDArray::empty: dtype " << dtype << " has no size";
  KILN_USER_CHECK(shape.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      << "NDArray::empty: too many dimensions (" << shape.size() << ")";
  const uint64_t elem_bytes = static_cast<uint64_t>(dtype.bytes());
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_USER_CHECK(shape[i] >= 0) << "NDArray::empty: dimension " << i << " of shape "
                                   << shape_str(shape) << " is negative (" << shape[i] << ")";
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(shape[i]), &numel)) overflow = true;
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, elem_bytes, &nbytes) ||
      nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - kArrayAlignment) {
    overflow = true;
  }
  // An empty array never overflows: some extent is 0.
  if (numel == 0) {
    overflow = false;
    nbytes = 0;
  }
  KILN_USER_CHECK(!overflow) << "NDArray::empty: shape " << shape_str(shape) << " of " << dtype
                             << " is too large to address";
  uint64_t alloc = (nbytes + kArrayAlignment - 1) / kArrayAlignment * kArrayAlignment;
  if (alloc == 0) alloc = kArrayAlignment;
  void* data = nullptr;
  if (dev.type != kKilnCPU) {
    data = device_alloc(dev, alloc);
    return NDArray(make_object<NDArrayNode>(std::move(shape), dtype, dev, data, nbytes));
  }
  KILN_USER_CHECK(posix_memalign(&data, kArrayAlignment, alloc) == 0)
      << "NDArray::empty: out of memory allocating " << nbytes << " bytes for shape "
      << shape_str(shape) << " of " << dtype;
  return NDArray(make_object<NDArrayNode>(std::move(shape), dtype, dev, data, nbytes));
}

const NDArrayNode& NDArray::get(const char* what) const {
  KILN_USER_CHECK(node_.defined()) << "NDArray::" << what << ": the array is undefined";
  return *node_;
}

const std::vector<int64_t>& NDArray::shape() const { return get("shape").shape; }
DataType NDArray::dtype() const { return get("dtype").dtype; }
Device NDArray::device() const { return get("device").device; }
int32_t NDArray::ndim() const { return static_cast<int32_t>(get("ndim").shape.size()); }
int64_t NDArray::numel() const {
  int64_t n = 1;
  for (int64_t d : get("numel").shape) n *= d;
  return n;
}
size_t NDArray::nbytes() const { return get("nbytes").nbytes; }
void* NDArray::data() const { return get("data").data; }
KilnArray* NDArray::raw() const { return &get("raw").array; }

void NDArray::copy_from(const void* src, size_t nbytes) const {
  const NDArrayNode& n = get("copy_from");
  KILN_USER_CHECK(nbytes == n.nbytes)
      << "NDArray::copy_from: the source has " << nbytes << " bytes but the array (" << n.dtype
      << ", shape " << shape_str(n.shape) << ") holds " << n.nbytes << " bytes";
  KILN_USER_CHECK(src != nullptr || nbytes == 0) << "NDArray::copy_from: the source is NULL";
  device_copy(n.data, n.device, src, Device::cpu(), nbytes);
}

void NDArray::copy_to(void* dst, size_t nbytes) const {
  const NDArrayNode& n = get("copy_to");
  KILN_USER_CHECK(nbytes == n.nbytes)
      << "NDArray::copy_to: the destination has " << nbytes << " bytes but the array (" << n.dtype
      << ", shape " << shape_str(n.shape) << ") holds " << n.nbytes << " bytes";
  KILN_USER_CHECK(dst != nullptr || nbytes == 0) << "NDArray::copy_to: the destination is NULL";
  device_copy(dst, Device::cpu(), n.data, n.device, nbytes);
}

NDArray NDArray::to(Device dev) const {
  const NDArrayNode& n = get("to");
  NDArray r = empty(n.shape, n.dtype, dev);
  device_copy(r.data(), dev, n.data, n.device, n.nbytes);
  return r;
}

std::string NDArray::str() const {
  if (!defined()) return "NDArray(undefined)";
  return "NDArray(" + node_->dtype.str() + ", " + shape_str(node_->shape) + ", " +
         node_->device.str() + ")";
}

}  // namespace kiln::runtime
