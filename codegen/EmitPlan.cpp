//===- EmitPlan.cpp - A whole module as a plan ----------------------------===//
#include "codegen/EmitPlan.h"

#include "codegen/EmitCompute.h"

#include "llvm/ADT/DenseMap.h"

namespace pax {

namespace {
/// Assigns buffers to values, one after another in a device's arena.
class BufferTable {
public:
  explicit BufferTable(plan::DeviceProgram &program) : program(program) {}

  uint32_t of(const Value *v) {
    auto [it, fresh] = ids.try_emplace(v, uint32_t(ids.size()));
    if (!fresh)
      return it->second;
    plan::Buffer *b = program.add_buffers();
    b->set_id(it->second);
    b->set_dtype(toPlanDType(v->type.elem));
    for (int64_t d : v->type.shape)
      b->add_shape(d);
    // 64-byte aligned, for vector loads.
    b->set_offset(end);
    end += (v->type.bytes() + 63) / 64 * 64;
    program.set_arena_bytes(end);
    return it->second;
  }

private:
  plan::DeviceProgram &program;
  llvm::DenseMap<const Value *, uint32_t> ids;
  int64_t end = 0;
};
} // namespace

static plan::TensorInfo tensorInfo(llvm::StringRef name, const TensorType &t) {
  plan::TensorInfo info;
  info.set_name(name.str());
  info.set_dtype(toPlanDType(t.elem));
  for (int64_t d : t.shape)
    info.add_shape(d);
  return info;
}

static void emitLoad(const Global &g, uint32_t buffer, plan::LoadWeight &load) {
  load.set_tensor(g.source == DataSource::Initializer ||
                          g.source == DataSource::Input
                      ? g.ref
                      : g.name());
  switch (g.source) {
  case DataSource::Initializer:
    load.set_source(plan::LoadWeight::INITIALIZER);
    break;
  case DataSource::Input:
    load.set_source(plan::LoadWeight::INPUT);
    break;
  case DataSource::Fill:
    load.set_source(plan::LoadWeight::FILL);
    break;
  case DataSource::Dense:
    load.set_source(plan::LoadWeight::DENSE);
    break;
  }
  for (int64_t d : g.value.type.shape) {
    load.add_global_shape(d);
    load.add_offset(0);
  }
  load.set_buffer(buffer);
  load.set_fill(g.fill);
  if (g.source == DataSource::Dense)
    load.set_dense(std::string(g.bytes.begin(), g.bytes.end()));
}

plan::Plan emitSingleDevicePlan(const Module &m, llvm::StringRef source) {
  plan::Plan p;
  p.set_model(m.name);
  p.set_source(source.str());
  p.set_devices(1);
  p.set_devices_per_node(1);
  plan::Group *all = p.add_groups();
  all->set_id(0);
  all->add_devices(0);
  plan::DeviceProgram &program = *p.add_programs();
  program.set_device(0);
  BufferTable buffers(program);
  const Func &f = m.main;
  for (size_t i = 0; i < f.args.size(); ++i) {
    *p.add_inputs() = tensorInfo(f.args[i]->name, f.args[i]->type);
    plan::Binding *b = program.add_inputs();
    b->set_index(uint32_t(i));
    b->set_buffer(buffers.of(f.args[i].get()));
    for (size_t d = 0; d < f.args[i]->type.rank(); ++d)
      b->add_offset(0);
  }
  for (const auto &g : m.globals)
    emitLoad(*g, buffers.of(&g->value),
             *program.add_instructions()->mutable_load());
  for (const auto &op : f.ops) {
    llvm::SmallVector<uint32_t, 4> ins, outs;
    for (const Operand &o : op->operands)
      ins.push_back(buffers.of(o.value));
    for (const Result &r : op->results)
      outs.push_back(buffers.of(r.value.get()));
    *program.add_instructions()->mutable_compute() =
        emitCompute(*op, ins, outs);
  }
  for (size_t i = 0; i < f.returns.size(); ++i) {
    *p.add_outputs() = tensorInfo(f.returnNames[i], f.returns[i]->type);
    plan::Binding *b = program.add_outputs();
    b->set_index(uint32_t(i));
    b->set_buffer(buffers.of(f.returns[i]));
    b->set_owner(true);
    for (size_t d = 0; d < f.returns[i]->type.rank(); ++d)
      b->add_offset(0);
  }
  program.set_predicted_peak_bytes(program.arena_bytes());
  return p;
}

} // namespace pax
