//===- OnnxSharding.cpp - A strategy as ONNX IR 11 annotations ------------===//
#include "frontend/OnnxSharding.h"

#include "frontend/OnnxMultiDevice.pb.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <google/protobuf/unknown_field_set.h>

namespace pax {

/// The field numbers of ONNX IR 11 (onnx.proto).
static constexpr int kModelConfiguration = 26;
static constexpr int kNodeDeviceConfigurations = 10;
static constexpr int64_t kIrVersion11 = 11;

/// Adds to \p model the configuration \p name of \p devices devices, and
/// raises its IR version to 11.
static void addModelConfiguration(onnx::ModelProto &model, llvm::StringRef name,
                                  int64_t devices) {
  onnx_ir11::DeviceConfigurationProto config;
  config.set_name(name.str());
  config.set_num_devices(int32_t(devices));
  for (int64_t d = 0; d < devices; ++d)
    config.add_device("device" + std::to_string(d));
  model.GetReflection()->MutableUnknownFields(&model)->AddLengthDelimited(
      kModelConfiguration, config.SerializeAsString());
  if (model.ir_version() < kIrVersion11)
    model.set_ir_version(kIrVersion11);
}

/// The nodes of \p model by name.
static llvm::StringMap<onnx::NodeProto *> nodesByName(onnx::ModelProto &model) {
  llvm::StringMap<onnx::NodeProto *> nodes;
  // Named as the importer names ops: a node without a name by its first
  // output.
  for (onnx::NodeProto &n : *model.mutable_graph()->mutable_node())
    nodes[n.name().empty() && n.output_size() ? n.output(0) : n.name()] = &n;
  return nodes;
}

/// Adds to \p spec one sharded dim per split dim of \p sharding.
static void addShardedDims(onnx_ir11::ShardingSpecProto &spec,
                           const TensorSharding &sharding) {
  for (const TensorSharding::Dim &d : sharding.dims) {
    onnx_ir11::ShardedDimProto &sd = *spec.add_sharded_dim();
    sd.set_axis(d.axis);
    onnx_ir11::SimpleShardedDimProto &simple = *sd.add_simple_sharding();
    simple.set_dim_value(d.extent);
    simple.set_num_shards(d.shards);
  }
}

/// Adds to \p spec the devices that hold each shard of \p sharding, on a
/// cluster of \p devices devices.
static void addShardDevices(onnx_ir11::ShardingSpecProto &spec,
                            const TensorSharding &sharding, int64_t devices) {
  // A shard one device holds names the device; a shard held by several
  // names a group, a key past the device ids that the map expands.
  int64_t nextGroup = devices;
  for (const std::vector<int64_t> &holders : sharding.devices) {
    if (holders.size() == 1) {
      spec.add_device(holders[0]);
      continue;
    }
    onnx_ir11::IntIntListEntryProto &group =
        *spec.add_index_to_device_group_map();
    group.set_key(nextGroup);
    for (int64_t d : holders)
      group.add_value(d);
    spec.add_device(nextGroup++);
  }
}

llvm::Error annotateSharding(onnx::ModelProto &model, llvm::StringRef name,
                             int64_t devices,
                             llvm::ArrayRef<OutputSharding> outputs) {
  addModelConfiguration(model, name, devices);
  llvm::StringMap<onnx::NodeProto *> nodes = nodesByName(model);
  // One NodeDeviceConfigurationProto per node, its outputs' specs in order.
  std::vector<
      std::pair<onnx::NodeProto *, onnx_ir11::NodeDeviceConfigurationProto>>
      perNode;
  llvm::DenseMap<onnx::NodeProto *, size_t> slot;
  for (const OutputSharding &o : outputs) {
    auto it = nodes.find(o.node);
    if (it == nodes.end())
      return llvm::createStringError("the model has no node '" + o.node + "'");
    onnx::NodeProto *n = it->second;
    if (int(o.output) >= n->output_size())
      return llvm::createStringError("node '" + o.node + "' has no output " +
                                     std::to_string(o.output));
    auto [at, fresh] = slot.try_emplace(n, perNode.size());
    if (fresh) {
      perNode.emplace_back(n, onnx_ir11::NodeDeviceConfigurationProto());
      perNode.back().second.set_configuration_id(name.str());
    }
    onnx_ir11::ShardingSpecProto &spec =
        *perNode[at->second].second.add_sharding_spec();
    spec.set_tensor_name(n->output(int(o.output)));
    addShardedDims(spec, o.sharding);
    addShardDevices(spec, o.sharding, devices);
  }
  for (auto &[n, c] : perNode)
    n->GetReflection()->MutableUnknownFields(n)->AddLengthDelimited(
        kNodeDeviceConfigurations, c.SerializeAsString());
  return llvm::Error::success();
}

} // namespace pax
