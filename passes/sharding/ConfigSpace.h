//===- ConfigSpace.h - The legal split configurations of an op ------------===//
//
// A configuration (PaSE) gives every iteration dim of an op a split factor
// that divides its extent; their product is the number of devices the op
// runs on, at most the cluster's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Module.h"

#include <string>
#include <vector>

namespace pax {

/// Split factor per iteration dim, in iteration order.
using Config = llvm::SmallVector<int64_t, 6>;

/// Restrictions of the configuration space.
struct ConfigOptions {
  int64_t devices = 1;       ///< the cluster's device count
  bool powersOfTwo = false;  ///< only split factors that are powers of two
  bool exact = false;        ///< only configurations using every device
  /// Only configurations whose device count divides the devices (an op
  /// placed at a multiple of its device count: a pipeline stage's ops on
  /// the stage's devices).
  bool dividing = false;
  int64_t maxPerDim = 0;     ///< cap on any one factor (0: none)
  unsigned maxSplitDims = 0; ///< most dims split at once (0: any number)
  /// Only splits a plan can run (see executableSplit).
  bool executable = false;
  /// An op with a `config` attribute keeps it as its only candidate, with
  /// the splits it may not take (see splittableDims) undone: a training
  /// step's backward ops keep their forward op's configuration.
  bool keepGiven = false;
};

/// Which iteration dims of \p op may be split at all: `par` and `red` dims,
/// except a window's kernel dim, a minor dim of a row-major group (its
/// blocks are not contiguous), and, in an op with a `seq` dim, anything but
/// parallel dims that index no weight (the recurrence needs the rest whole).
llvm::SmallVector<bool, 6> splittableDims(const Op &op,
                                          bool executable = false);

/// True when a plan can run \p op with iteration dim \p d split: the cost
/// model prices more than plans run. Not yet runnable: a reduction the
/// result keeps (a normalized dim, whose statistics would cross devices),
/// a dropped reduction whose partial results do not combine by a sum
/// (max, min, prod, L2, log-sum-exp, arg max/min, a pool's window), and a
/// dim a result is written through with an offset or stride.
bool executableSplit(const Op &op, unsigned d);

/// Every configuration of \p op under \p options, in a deterministic order
/// (lexicographic in the factors); the unsplit configuration is always
/// first, even under `exact`, so that every op has at least one.
std::vector<Config> enumerateConfigs(const Op &op,
                                     const ConfigOptions &options);

/// The number of devices a configuration uses: the product of its factors.
int64_t configDevices(const Config &c);

/// `<b: 2, k: 4>` (split dims only), `<>` when nothing is split.
std::string configStr(const Op &op, const Config &c);

} // namespace pax
