//===- InsertCollectives.h - A strategy's moves as collective ops ---------===//
//
// After pax-solve-sharding (or --strategy) has given every op a `config`,
// insert-collectives makes every move the cost model priced an op of the
// IR: before each consumer the steps of planReshard from the producer's
// layout to the one the consumer reads (partial sums reduced there: an
// all_reduce, or a reduce_scatter into a split reader), and an `all_reduce`
// of a returned result's partial sums. Each collective is the identity on the whole tensor
// and records how it moves blocks between devices:
//
//   positions  the device-id digits the step runs across
//   space      the sizes of all digits of the step's device numbering
//   layout     the layout after the step, 4 ints per digit: size, role
//              (0 replicated, 1 split, 2 partial), tensor dim, level
//   halo       per tensor dim, the rows read before and after the block
//   bytes      what the cost model counts per device for the step
//
// A training step's updated globals are kept between steps in one layout
// (the first reader's, or at ZeRO-3 the update's own): each update moves
// there at the step's end, and a reader the kept blocks do not cover reads
// a `local_slice` of the global in the kept layout, moved to its own.
//
// Ops that compute only on constants get `everywhere = 1`: every device
// computes them whole, and their readers need no move. The module records
// `devices` and `devices_per_node`. Codegen turns this IR into one program
// per device without knowing anything of layouts beyond these attributes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"
#include "passes/sharding/ShardingPasses.h"

namespace pax {

/// Inserts the collectives of the strategy in the ops' `config` attributes
/// for \p devices devices, \p devicesPerNode to a node.
llvm::Error insertCollectives(Module &m, int64_t devices,
                              int64_t devicesPerNode);

/// The `config` attribute of \p op, checked against its iteration space.
llvm::Expected<Config> configOf(const Op &op);

class InsertCollectivesPass : public Pass {
public:
  explicit InsertCollectivesPass(ShardingPassOptions o)
      : options(std::move(o)) {}
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override {
    return "pax-insert-collectives";
  }
  llvm::Error run(Module &m, PassContext &ctx) override;

private:
  ShardingPassOptions options;
};

} // namespace pax
