//===- Checkpoint.h - A training session's sharded checkpoints --*- C++ -*-===//
//
// `paxrun --train --checkpoint=DIR` writes a sharded checkpoint: each
// device writes the blocks of the updated weights and optimizer state it
// owns (DIR/sS_dD_N.pb, ONNX TensorProtos of the blocks) and an index of
// them (DIR/sS_dD.txt: per line the file, the block's start and shape, its
// element type and the tensor's name, tab-separated), for step S. Once
// every device's blocks are written, DIR/checkpoint.txt names the step and
// the device count: written last (to a temporary, then renamed), so a
// checkpoint is whole or absent. `--resume=DIR` assembles each block a
// device loads from the blocks that overlap it, so a checkpoint loads onto
// the plan that wrote it, bit for bit, or onto another plan of the same
// model and optimizer (another strategy, another device count). The
// readers check everything: a missing shard, a tensor the plan does not
// update, one of another shape or element type, blocks that overlap or
// leave part of a tensor uncovered are errors naming the file.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "runtime/Tensor.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pax {

/// A fingerprint of \p plan (the checkpoint records which plan wrote it).
std::string planFingerprint(const plan::Plan &plan);

/// One block of a tensor: its name, where it starts in the whole tensor,
/// and its values.
struct TensorBlock {
  std::string name;
  std::vector<int64_t> lo;
  runtime::Tensor t;
};

/// Writes device \p device's \p blocks of the checkpoint of step \p step
/// into \p dir (which must exist): the block files and their index.
llvm::Error
writeCheckpointShard(const std::string &dir, unsigned step, unsigned device,
                     const std::vector<const TensorBlock *> &blocks);

/// Commits the checkpoint of step \p step written by \p devices devices'
/// shards: DIR/checkpoint.txt; then removes the files of other steps.
llvm::Error commitCheckpoint(const std::string &dir, const plan::Plan &plan,
                             unsigned step, unsigned devices);

/// What checkpoint.txt (\p text) says: the step to resume at and the
/// shards' device count; \p origin names it in errors.
struct CheckpointIndex {
  unsigned step = 0;
  unsigned devices = 0;
};
llvm::Expected<CheckpointIndex> parseCheckpointIndex(llvm::StringRef text,
                                                     llvm::StringRef origin);

/// A checkpoint's blocks, read for the plan that resumes from it.
class CheckpointReader {
public:
  /// Reads DIR's index and every shard's, checked against \p plan's
  /// updates (outputs `update/NAME`): each covered exactly, in its shape
  /// and element type, and nothing else.
  static llvm::Expected<std::unique_ptr<CheckpointReader>>
  open(const std::string &dir, const plan::Plan &plan);

  unsigned step() const { return index.step; }
  bool holds(const std::string &name) const { return blocks.count(name); }
  /// Fills \p out, the box of \p name that starts at \p lo, from the
  /// blocks that overlap it (each block file read once; thread-safe).
  llvm::Error read(const std::string &name, llvm::ArrayRef<int64_t> lo,
                   runtime::Tensor &out);

private:
  struct Block {
    std::string path;
    std::vector<int64_t> lo, shape;
    plan::DType dtype;
  };
  llvm::Expected<const runtime::Tensor *> load(const std::string &name,
                                               const Block &b);

  CheckpointIndex index;
  std::map<std::string, std::vector<Block>> blocks;
  std::mutex m;
  std::map<std::string, runtime::Tensor> cache;
};

/// One block file's \p bytes (\p path names it), checked to hold \p name
/// in \p shape and \p dtype.
llvm::Expected<runtime::Tensor>
parseCheckpointBlock(llvm::StringRef bytes, llvm::StringRef path,
                     llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                     plan::DType dtype);

/// One shard index's \p text (\p path names it) as (file, start, shape,
/// element type, name) lines, relative files resolved against \p dir.
struct ShardLine {
  std::string path, name;
  std::vector<int64_t> lo, shape;
  plan::DType dtype;
};
llvm::Expected<std::vector<ShardLine>> parseShardIndex(llvm::StringRef text,
                                                       llvm::StringRef path,
                                                       const std::string &dir);

} // namespace pax
