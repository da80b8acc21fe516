//===- OnnxSharding.h - A strategy as ONNX IR 11 annotations ----*- C++ -*-===//
//
// `paxc --emit=onnx-sharded` writes the source model with ONNX IR version
// 11's multi-device annotations for the chosen strategy: one
// DeviceConfigurationProto (the cluster's devices) on the model, and on each
// node paxc partitions a NodeDeviceConfigurationProto whose
// ShardingSpecProtos say how each of the node's outputs is split and which
// devices hold each shard (copies as device groups).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Layout.h"

#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace pax {

/// The sharding of output \p output of the node called \p node (a node
/// without a name: its first output's name, as ops are named on import).
struct OutputSharding {
  std::string node;
  unsigned output = 0;
  TensorSharding sharding;
};

/// Adds to \p model the configuration \p name of \p devices devices and
/// each of \p outputs' sharding spec, and raises its IR version to 11. A
/// node or output \p outputs names that the model lacks is an error.
llvm::Error annotateSharding(onnx::ModelProto &model, llvm::StringRef name,
                             int64_t devices,
                             llvm::ArrayRef<OutputSharding> outputs);

} // namespace pax
