//===- Checkpoint.cpp - A training session's sharded checkpoints ----------===//
#include "tools/common/Checkpoint.h"

#include "codegen/plan/PlanFile.h"
#include "frontend/TensorProto.h"
#include "runtime/Exchange.h"
#include "tools/common/TensorFiles.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <onnx/onnx_pb.h>

namespace pax {

static constexpr const char *kVersion = "checkpoint 2";

std::string planFingerprint(const plan::Plan &plan) {
  std::string bytes;
  plan.SerializeToString(&bytes);
  return llvm::utohexstr(llvm::xxh3_64bits(llvm::arrayRefFromStringRef(bytes)));
}

static std::string csv(llvm::ArrayRef<int64_t> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

static std::optional<std::vector<int64_t>> parseCsv(llvm::StringRef s) {
  std::vector<int64_t> out;
  if (s.empty())
    return out;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  s.split(parts, ',');
  for (llvm::StringRef p : parts) {
    int64_t v;
    if (p.getAsInteger(10, v) || v < 0)
      return std::nullopt;
    out.push_back(v);
  }
  return out;
}

static std::string shardName(unsigned step, unsigned device) {
  return "s" + std::to_string(step) + "_d" + std::to_string(device);
}

/// Writes \p text to \p path through a temporary renamed into place.
static llvm::Error writeWhole(const std::string &path, llvm::StringRef text) {
  std::string tmp = path + ".tmp";
  if (auto err = writeFileBytes(tmp, text))
    return err;
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path))
    return llvm::createStringError("cannot write '" + path +
                                   "': " + ec.message());
  return llvm::Error::success();
}

llvm::Error
writeCheckpointShard(const std::string &dir, unsigned step, unsigned device,
                     const std::vector<const TensorBlock *> &blocks) {
  std::string index, base = shardName(step, device);
  for (size_t n = 0; n < blocks.size(); ++n) {
    const TensorBlock &b = *blocks[n];
    std::string file = base + "_" + std::to_string(n) + ".pb";
    if (auto err = writeTensorFile(dir + "/" + file, b.name, b.t))
      return err;
    index += file + "\t" + csv(b.lo) + "\t" + csv(b.t.shape) + "\t" +
             std::to_string(int(b.t.dtype)) + "\t" + b.name + "\n";
  }
  return writeWhole(dir + "/" + base + ".txt", index);
}

/// Whether \p file belongs to a checkpoint of a step other than \p step.
static bool otherStep(llvm::StringRef file, unsigned step) {
  if (file.starts_with("tensor_"))
    return true; // the unsharded format's
  if (!file.consume_front("s"))
    return false;
  auto [number, rest] = file.split("_d");
  unsigned s;
  return !rest.empty() && !number.getAsInteger(10, s) && s != step;
}

llvm::Error commitCheckpoint(const std::string &dir, const plan::Plan &plan,
                             unsigned step, unsigned devices) {
  std::string text = "paxrun " + std::string(kVersion) + "\nstep " +
                     std::to_string(step) + "\ndevices " +
                     std::to_string(devices) + "\nplan " +
                     planFingerprint(plan) + "\n";
  if (auto err = writeWhole(dir + "/checkpoint.txt", text))
    return err;
  std::error_code ec;
  std::vector<std::string> stale;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    llvm::StringRef file = llvm::sys::path::filename(it->path());
    if (otherStep(file, step))
      stale.push_back(it->path());
  }
  for (const std::string &path : stale)
    llvm::sys::fs::remove(path);
  return llvm::Error::success();
}

llvm::Expected<CheckpointIndex> parseCheckpointIndex(llvm::StringRef text,
                                                     llvm::StringRef origin) {
  llvm::SmallVector<llvm::StringRef, 4> lines;
  text.split(lines, '\n', -1, false);
  std::optional<unsigned> step, devices;
  bool version = false;
  for (llvm::StringRef line : lines) {
    auto [key, value] = line.split(' ');
    unsigned n;
    if (key == "paxrun" && value == kVersion)
      version = true;
    else if (key == "plan")
      continue;
    else if (key == "step" && !value.getAsInteger(10, n))
      step = n;
    else if (key == "devices" && !value.getAsInteger(10, n) && n > 0)
      devices = n;
    else
      return llvm::createStringError(origin +
                                     ": a line paxrun does not "
                                     "write: '" +
                                     line.take_front(80) + "'");
  }
  if (!version)
    return llvm::createStringError(origin + ": not a paxrun " + kVersion +
                                   " index");
  if (!step || !devices)
    return llvm::createStringError(origin + ": no step or devices line");
  return CheckpointIndex{*step, *devices};
}

llvm::Expected<std::vector<ShardLine>> parseShardIndex(llvm::StringRef text,
                                                       llvm::StringRef path,
                                                       const std::string &dir) {
  llvm::SmallVector<llvm::StringRef, 16> lines;
  text.split(lines, '\n', -1, false);
  std::vector<ShardLine> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto bad = [&](const llvm::Twine &why) {
      return llvm::createStringError(path + ":" + llvm::Twine(i + 1) + ": " +
                                     why);
    };
    llvm::SmallVector<llvm::StringRef, 5> f;
    lines[i].split(f, '\t', 4);
    if (f.size() != 5)
      return bad("expected file, start, shape, element type and name");
    if (f[0].empty() || f[0].contains('/') || f[0].starts_with("."))
      return bad("'" + f[0].take_front(80) + "' is not a file of the folder");
    auto lo = parseCsv(f[1]), shape = parseCsv(f[2]);
    int dtype;
    if (!lo || !shape || lo->size() != shape->size())
      return bad("the start and shape must be as many non-negative integers");
    if (f[3].getAsInteger(10, dtype) || !plan::DType_IsValid(dtype))
      return bad("'" + f[3].take_front(20) + "' is not an element type");
    out.push_back(
        {dir + "/" + f[0].str(), f[4].str(), *lo, *shape, plan::DType(dtype)});
  }
  return out;
}

llvm::Expected<runtime::Tensor>
parseCheckpointBlock(llvm::StringRef bytes, llvm::StringRef path,
                     llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                     plan::DType dtype) {
  onnx::TensorProto proto;
  if (bytes.size() > size_t(INT32_MAX) ||
      !proto.ParseFromArray(bytes.data(), int(bytes.size())))
    return llvm::createStringError("'" + path + "' is not an ONNX TensorProto");
  if (proto.name() != name)
    return llvm::createStringError("'" + path + "' holds '" + proto.name() +
                                   "', not '" + name + "' as its index says");
  auto c = readTensorProto(proto, llvm::sys::path::parent_path(path));
  if (!c)
    return llvm::createStringError("'" + path +
                                   "': " + llvm::toString(c.takeError()));
  runtime::Tensor t = toRuntimeTensor(*c);
  if (t.dtype != dtype ||
      t.shape != std::vector<int64_t>(shape.begin(), shape.end()))
    return llvm::createStringError(
        "'" + path + "' holds '" + name +
        "' in another shape or element type than its index says");
  return t;
}

/// Checks \p blocks of \p name against the plan's \p info: in its element
/// type and bounds, apart, and covering it whole.
static llvm::Error checkCover(const std::string &name,
                              const plan::TensorInfo &info,
                              const std::vector<ShardLine> &blocks) {
  std::vector<int64_t> shape(info.shape().begin(), info.shape().end());
  int64_t total = 1, covered = 0;
  for (int64_t s : shape)
    total *= s;
  auto box = [](const ShardLine &b) {
    plan::Box x;
    for (size_t i = 0; i < b.lo.size(); ++i)
      x.add_lo(b.lo[i]), x.add_size(b.shape[i]);
    return x;
  };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ShardLine &b = blocks[i];
    bool inside = b.lo.size() == shape.size() && b.dtype == info.dtype();
    int64_t volume = 1;
    for (size_t d = 0; inside && d < shape.size(); ++d) {
      inside = b.lo[d] + b.shape[d] <= shape[d];
      volume *= b.shape[d];
    }
    if (!inside)
      return llvm::createStringError(
          "'" + b.path + "' holds a block of '" + name +
          "' outside its shape or in another element type than the plan's");
    for (size_t j = 0; j < i; ++j)
      if (runtime::overlapElements(box(b), box(blocks[j]), shape.size()) > 0)
        return llvm::createStringError(
            "'" + b.path + "' and '" + blocks[j].path +
            "' hold overlapping blocks of '" + name + "'");
    covered += volume;
  }
  if (covered != total)
    return llvm::createStringError("the checkpoint holds " +
                                   std::to_string(covered) + " of the " +
                                   std::to_string(total) + " elements of '" +
                                   name + "' (a shard is missing)");
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<CheckpointReader>>
CheckpointReader::open(const std::string &dir, const plan::Plan &plan) {
  std::string origin = "--resume=" + dir;
  auto text = llvm::MemoryBuffer::getFile(dir + "/checkpoint.txt");
  if (!text)
    return llvm::createStringError(origin + ": no checkpoint there (" +
                                   text.getError().message() + ")");
  auto index = parseCheckpointIndex((*text)->getBuffer(), origin);
  if (!index)
    return index.takeError();
  std::map<std::string, std::vector<ShardLine>> byName;
  for (unsigned d = 0; d < index->devices; ++d) {
    std::string path = dir + "/" + shardName(index->step, d) + ".txt";
    auto shard = llvm::MemoryBuffer::getFile(path);
    if (!shard)
      return llvm::createStringError(origin + ": shard '" + path +
                                     "' is missing (" +
                                     shard.getError().message() + ")");
    auto lines = parseShardIndex((*shard)->getBuffer(), path, dir);
    if (!lines)
      return lines.takeError();
    for (ShardLine &l : *lines)
      byName[l.name].push_back(std::move(l));
  }
  std::map<std::string, const plan::TensorInfo *> updates;
  for (const plan::TensorInfo &out : plan.outputs())
    if (llvm::StringRef(out.name()).starts_with("update/"))
      updates[out.name().substr(7)] = &out;
  for (const auto &[name, blocks] : byName)
    if (!updates.count(name))
      return llvm::createStringError(
          origin + ": the checkpoint holds '" + name +
          "', which the plan does not update (a checkpoint of another model "
          "or optimizer)");
  auto reader = std::make_unique<CheckpointReader>();
  reader->index = *index;
  for (const auto &[name, info] : updates) {
    auto it = byName.find(name);
    if (it == byName.end())
      return llvm::createStringError(
          origin + ": the checkpoint has no '" + name +
          "', which the plan updates (a checkpoint of another model or "
          "optimizer)");
    if (auto err = checkCover(name, *info, it->second))
      return llvm::createStringError(origin + ": " +
                                     llvm::toString(std::move(err)));
    for (const ShardLine &l : it->second)
      reader->blocks[name].push_back({l.path, l.lo, l.shape, l.dtype});
  }
  return reader;
}

llvm::Expected<const runtime::Tensor *>
CheckpointReader::load(const std::string &name, const Block &b) {
  std::lock_guard<std::mutex> lock(m);
  if (auto it = cache.find(b.path); it != cache.end())
    return &it->second;
  auto buf = llvm::MemoryBuffer::getFile(b.path, false, false);
  if (!buf)
    return llvm::createStringError("cannot read '" + b.path + "'");
  auto t =
      parseCheckpointBlock((*buf)->getBuffer(), b.path, name, b.shape, b.dtype);
  if (!t)
    return t.takeError();
  return &cache.emplace(b.path, std::move(*t)).first->second;
}

llvm::Error CheckpointReader::read(const std::string &name,
                                   llvm::ArrayRef<int64_t> lo,
                                   runtime::Tensor &out) {
  int64_t moved = 0;
  auto it = blocks.find(name);
  if (it == blocks.end())
    return llvm::createStringError("the checkpoint has no '" + name + "'");
  for (const Block &b : it->second) {
    auto t = load(name, b);
    if (!t)
      return t.takeError();
    moved += runtime::moveOverlap(**t, b.lo, out, lo, false);
  }
  if (moved != out.numel())
    return llvm::createStringError("the checkpoint's blocks of '" + name +
                                   "' do not cover the block a device loads");
  return llvm::Error::success();
}

} // namespace pax
