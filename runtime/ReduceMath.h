//===- ReduceMath.h - One output element's reduction, host and device ----===//
//
// The running reduction of every reduce kind: the CPU's generic reduction
// and the CUDA reduction kernel both fold an output's inner points through
// Accumulator, in the same order, so their results agree. Plain C++ built
// by the host compiler and by nvcc.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_REDUCEMATH_H
#define PAX_RUNTIME_REDUCEMATH_H

#include "runtime/HostDevice.h"

namespace pax::runtime {

/// The reduction kinds over `red` dims.
enum class ReduceOp {
  Sum,
  Mean,
  Max,
  Min,
  Prod,
  L1,
  L2,
  SumSquare,
  LogSumExp,
  ArgMax,
  ArgMin
};

/// One output element's running reduction, in \p T (double or int64).
/// Integer sums wrap rather than overflow.
template <typename T> struct Accumulator {
  ReduceOp op;
  bool selectLast;
  T acc;
  double lseMax = -INFINITY; // log-sum-exp: the running maximum
  int64_t best = -1;         // arg_max / arg_min: the position kept

  static constexpr bool kReal = sizeof(T) == sizeof(double) && T(0.5) != T(0);

  PAX_HD Accumulator(ReduceOp op, bool selectLast)
      : op(op), selectLast(selectLast) {
    if (op == ReduceOp::Prod)
      acc = 1;
    else if (op == ReduceOp::Max || op == ReduceOp::ArgMax)
      acc = kReal ? T(-INFINITY) : T(INT64_MIN);
    else if (op == ReduceOp::Min || op == ReduceOp::ArgMin)
      acc = kReal ? T(INFINITY) : T(INT64_MAX);
    else
      acc = 0;
  }

  PAX_HD static bool isNan(T v) { return v != v; }
  PAX_HD static T plus(T a, T b) {
    if constexpr (kReal)
      return a + b;
    else
      return T(uint64_t(a) + uint64_t(b));
  }
  PAX_HD static T times(T a, T b) {
    if constexpr (kReal)
      return a * b;
    else
      return T(uint64_t(a) * uint64_t(b));
  }

  /// Takes \p v, the element at row-major position \p pos of the reduction.
  PAX_HD void add(T v, int64_t pos) {
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      acc = plus(acc, v);
      break;
    case ReduceOp::Max:
      acc = v > acc || isNan(v) ? v : acc; // NaN propagates, like ONNX
      break;
    case ReduceOp::Min:
      acc = v < acc || isNan(v) ? v : acc;
      break;
    case ReduceOp::Prod:
      acc = times(acc, v);
      break;
    case ReduceOp::L1:
      acc = plus(acc, v < 0 ? T(0) - v : v);
      break;
    case ReduceOp::L2:
    case ReduceOp::SumSquare:
      acc = plus(acc, times(v, v));
      break;
    case ReduceOp::LogSumExp:
      addLogSumExp(double(v));
      break;
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: {
      bool better = op == ReduceOp::ArgMax ? v > acc : v < acc;
      if (best < 0 || better || (selectLast && v == acc))
        acc = v, best = pos;
      break;
    }
    }
  }

  /// Takes \p o, the partial reduction of other points (what the threads
  /// of a block combine). Not for arg-reductions or log-sum-exp.
  PAX_HD void merge(const Accumulator &o) {
    switch (op) {
    case ReduceOp::Max:
    case ReduceOp::Min:
      add(o.acc, 0); // the better of the two, NaN propagating
      break;
    case ReduceOp::Prod:
      acc = times(acc, o.acc);
      break;
    default: // sums: of values, absolute values or squares
      acc = plus(acc, o.acc);
      break;
    }
  }

  /// log(sum(exp)) kept as max + log(sum(exp(v - max))), which cannot
  /// overflow.
  PAX_HD void addLogSumExp(double v) {
    if (v > lseMax) {
      acc = T(double(acc) * exp(lseMax - v) + 1);
      lseMax = v;
    } else {
      acc = T(double(acc) + exp(v - lseMax));
    }
  }

  /// The reduced value of \p count reduced points.
  PAX_HD double finishReal(int64_t count) const {
    if (op == ReduceOp::Mean)
      return double(acc) / double(count);
    if (op == ReduceOp::L2)
      return sqrt(double(acc));
    if (op == ReduceOp::LogSumExp)
      return lseMax + log(double(acc));
    return double(acc);
  }

  /// The reduced value as an integer result (arg positions, integer
  /// reductions; a mean divides by \p count, at least 1).
  PAX_HD int64_t finishInteger(int64_t count) const {
    if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin)
      return best > 0 ? best : 0;
    if (op == ReduceOp::Mean)
      return int64_t(acc) / (count > 1 ? count : 1);
    return int64_t(acc);
  }
};

} // namespace pax::runtime

#endif // PAX_RUNTIME_REDUCEMATH_H
