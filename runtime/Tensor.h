//===- Tensor.h - A host tensor for the CPU kernels ------------*- C++ -*-===//
#ifndef PAX_RUNTIME_TENSOR_H
#define PAX_RUNTIME_TENSOR_H

#include "codegen/plan/Plan.pb.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace pax::runtime {

/// Bytes one element of \p dtype takes (I1 takes a byte).
int64_t dtypeBytes(plan::DType dtype);

/// True for F32, F64, F16 and BF16.
bool isFloatDType(plan::DType dtype);

/// A tensor's bytes in host memory: its own, or a view of memory another
/// owner keeps (a block of a device's arena). A copy is always bytes of its
/// own (a copy of a view included); a move moves the view, so code that
/// moves a tensor out of an arena's buffers must copy it instead (owned()).
class Bytes {
public:
  Bytes() = default;
  /// \p n zero bytes of its own.
  explicit Bytes(size_t n) : own(n, 0), ptr(own.data()), n(n) {}
  /// The bytes [\p first, \p last), its own.
  template <typename It> Bytes(It first, It last) : own(first, last) {
    ptr = own.data();
    n = own.size();
  }
  /// A view of \p n bytes at \p p, which the caller keeps alive.
  static Bytes view(uint8_t *p, size_t n) {
    Bytes b;
    b.ptr = p;
    b.n = n;
    b.isView = true;
    return b;
  }
  Bytes(const Bytes &o) : Bytes(o.begin(), o.end()) {}
  Bytes(Bytes &&o) noexcept { *this = std::move(o); }
  Bytes &operator=(const Bytes &o) {
    if (this != &o)
      *this = Bytes(o);
    return *this;
  }
  Bytes &operator=(Bytes &&o) noexcept {
    if (this == &o)
      return *this;
    own = std::move(o.own);
    ptr = o.isView ? o.ptr : own.data();
    n = o.n;
    isView = o.isView;
    o.own.clear();
    o.ptr = nullptr;
    o.n = 0;
    o.isView = false;
    return *this;
  }

  uint8_t *data() { return ptr; }
  const uint8_t *data() const { return ptr; }
  size_t size() const { return n; }
  bool empty() const { return n == 0; }
  uint8_t *begin() { return ptr; }
  uint8_t *end() { return ptr + n; }
  const uint8_t *begin() const { return ptr; }
  const uint8_t *end() const { return ptr + n; }
  uint8_t &operator[](size_t i) { return ptr[i]; }
  uint8_t operator[](size_t i) const { return ptr[i]; }
  /// Whether the bytes are a view of another owner's memory.
  bool view() const { return isView; }
  bool operator==(const Bytes &o) const {
    return n == o.n && (n == 0 || std::memcmp(ptr, o.ptr, n) == 0);
  }
  bool operator!=(const Bytes &o) const { return !(*this == o); }

private:
  std::vector<uint8_t> own;
  uint8_t *ptr = nullptr;
  size_t n = 0;
  bool isView = false;
};

/// A dense row-major tensor in host memory (its own or an arena's).
struct Tensor {
  plan::DType dtype = plan::F32;
  std::vector<int64_t> shape;
  Bytes data;
  /// A device buffer that holds the same values, at the same address,
  /// from its load on and in every later run of the program until the
  /// device's next Device::beginRun with resident false: a weight loaded
  /// from the model into a persistent buffer (kept between runs under
  /// RunOptions::weightsResident). Kernels may keep what they derive from
  /// it (packed convolution weights) until then.
  bool resident = false;

  /// A zero-filled tensor of \p shape.
  static Tensor zeros(plan::DType dtype, std::vector<int64_t> shape);
  /// A tensor of \p shape over the memory at \p p (at least bytes()
  /// long, kept alive by the caller), zero-filled when \p zero.
  static Tensor view(plan::DType dtype, std::vector<int64_t> shape, uint8_t *p,
                     bool zero);
  /// This tensor with bytes of its own: moved when they are, copied when
  /// they are a view.
  Tensor owned() && {
    if (data.view())
      return Tensor{dtype, shape, Bytes(data.begin(), data.end())};
    return std::move(*this);
  }

  /// Number of elements (1 for a scalar).
  int64_t numel() const;
  /// Whether this tensor and \p o share any byte.
  bool sharesBytes(const Tensor &o) const {
    const uint8_t *a = data.data(), *b = o.data.data();
    return a < b + o.data.size() && b < a + data.size();
  }
  /// Bytes the elements take.
  int64_t bytes() const { return numel() * dtypeBytes(dtype); }

  /// Element \p i as a double (any dtype; integers convert).
  double real(int64_t i) const;
  /// Element \p i as an int64 (floats truncate toward zero, NaN reads 0).
  int64_t integer(int64_t i) const;
  /// Stores \p v at \p i, converted to the dtype (integers truncate toward
  /// zero and saturate, NaN stores 0; I1 stores v != 0).
  void setReal(int64_t i, double v);
  /// Stores \p v at \p i, converted to the dtype (integers wrap).
  void setInteger(int64_t i, int64_t v);
};

} // namespace pax::runtime

#endif // PAX_RUNTIME_TENSOR_H
