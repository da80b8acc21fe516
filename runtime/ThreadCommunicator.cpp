//===- ThreadCommunicator.cpp - A plan's devices as threads ---------------===//
#include "runtime/Communicator.h"
#include "runtime/Exchange.h"

#include "llvm/ADT/STLExtras.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace pax::runtime {

llvm::Error checkCollective(const plan::Plan &plan, uint32_t device,
                            const plan::Collective &c, const Tensor &in,
                            const Tensor &out) {
  auto bad = [&](const llvm::Twine &msg) {
    return llvm::createStringError("device " + llvm::Twine(device) +
                                   ": collective on exchange " +
                                   llvm::Twine(c.exchange()) + ": " + msg);
  };
  if (c.group() >= uint32_t(plan.groups_size()))
    return bad("no group " + llvm::Twine(c.group()));
  if (c.exchange() >= uint32_t(plan.exchanges_size()))
    return bad("no such exchange");
  const plan::Group &g = plan.groups(int(c.group()));
  if (!llvm::is_contained(g.devices(), device))
    return bad("the device is not in group " + llvm::Twine(c.group()));
  const plan::Exchange &x = plan.exchanges(int(c.exchange()));
  if (x.in_size() != int(plan.devices()) || x.out_size() != int(plan.devices()))
    return bad("the exchange does not list a box per device");
  for (uint32_t d : g.devices())
    if (d >= plan.devices())
      return bad("group member " + llvm::Twine(d) + " is not a device");
  auto fits = [&](const plan::Box &b, const Tensor &t) {
    if (b.empty())
      return t.numel() == 0;
    if (size_t(b.size_size()) != t.shape.size() ||
        size_t(b.lo_size()) != t.shape.size())
      return false;
    for (size_t i = 0; i < t.shape.size(); ++i)
      if (b.size(int(i)) != t.shape[i])
        return false;
    return true;
  };
  if (!fits(x.in(int(device)), in) || !fits(x.out(int(device)), out))
    return bad("a buffer does not match its box");
  if (in.dtype != out.dtype)
    return bad("input and output types differ");
  return llvm::Error::success();
}

namespace {
/// A reusable barrier that an abort releases.
class Barrier {
public:
  explicit Barrier(size_t size) : size(size) {}
  /// False when aborted.
  bool wait(std::mutex &m, std::condition_variable &cv, bool &aborted,
            std::unique_lock<std::mutex> &lock) {
    if (aborted)
      return false;
    uint64_t phase = generation;
    if (++count == size) {
      count = 0;
      ++generation;
      cv.notify_all();
      return true;
    }
    cv.wait(lock, [&] { return generation != phase || aborted; });
    return !aborted;
  }

private:
  size_t size, count = 0;
  uint64_t generation = 0;
};

class ThreadCommunicator : public Communicator {
public:
  explicit ThreadCommunicator(const plan::Plan &plan) {
    for (const plan::Group &g : plan.groups())
      groups.emplace(g.id(), std::make_unique<GroupState>(g.devices_size()));
  }

  llvm::Error exchange(const plan::Plan &plan, uint32_t device,
                       const plan::Collective &c, const Tensor &in, Tensor &out,
                       Device &dev) override {
    if (auto err = checkCollective(plan, device, c, in, out))
      return err;
    const plan::Group &g = plan.groups(int(c.group()));
    const plan::Exchange &x = plan.exchanges(int(c.exchange()));
    auto it = groups.find(c.group());
    if (it == groups.end())
      return llvm::createStringError("no state for group " +
                                     llvm::Twine(c.group()));
    GroupState &s = *it->second;
    size_t rank = size_t(llvm::find(g.devices(), device) - g.devices().begin());
    // The input is complete before the others read it.
    if (auto err = dev.synchronize())
      return err;
    if (x.kind() == plan::Collective::SEND_RECV && dev.hostAccessible())
      return pointToPoint(device, g, c.exchange(), x, in, out, dev);
    std::unique_lock<std::mutex> lock(m);
    s.inputs[rank] = &in;
    s.devices[rank] = &dev;
    if (!s.barrier.wait(m, cv, aborted, lock))
      return abortedError();
    lock.unlock();
    // Every member's input is in place and nobody writes one until all
    // have passed the second barrier.
    llvm::Error err = gather(device, g, x, s, out, dev);
    if (!err)
      err = dev.synchronize(); // done reading the others' inputs
    lock.lock();
    if (err) {
      // Nobody waits at the second barrier for a member that failed.
      if (!aborted)
        reason = "device " + std::to_string(device) + " failed an exchange";
      aborted = true;
      cv.notify_all();
      return err;
    }
    if (!s.barrier.wait(m, cv, aborted, lock))
      return abortedError();
    return llvm::Error::success();
  }

  /// A point-to-point transfer (SEND_RECV) through mailboxes: a sender
  /// leaves a copy of its input for each device whose output it overlaps
  /// and goes on (a pipeline stage runs its next microbatch); a receiver
  /// waits for the copies it needs, in the order they were sent.
  llvm::Error pointToPoint(uint32_t device, const plan::Group &g,
                           uint32_t exchange, const plan::Exchange &x,
                           const Tensor &in, Tensor &out, Device &dev) {
    size_t r = tensorRank(x);
    if (auto err = checkPeerBoxes(x, g, r))
      return err;
    const plan::Box &myIn = x.in(int(device)), &myOut = x.out(int(device));
    std::unique_lock<std::mutex> lock(m);
    // One copy of the input, shared by every receiver it overlaps.
    std::shared_ptr<const Tensor> copy;
    for (uint32_t peer : g.devices())
      if (!myIn.empty() && overlapElements(myIn, x.out(int(peer)), r) > 0) {
        if (!copy)
          copy = std::make_shared<const Tensor>(in);
        mail[{exchange, device, peer}].push_back(copy);
      }
    cv.notify_all();
    if (auto err = dev.zero(out))
      return err;
    if (myOut.empty())
      return llvm::Error::success();
    std::vector<int64_t> outLo = boxLo(myOut, r);
    for (uint32_t peer : g.devices()) {
      const plan::Box &b = x.in(int(peer));
      if (b.empty() || overlapElements(b, myOut, r) == 0)
        continue;
      auto &box = mail[{exchange, peer, device}];
      cv.wait(lock, [&] { return !box.empty() || aborted; });
      if (aborted)
        return abortedError();
      std::shared_ptr<const Tensor> sent = std::move(box.front());
      box.pop_front();
      if (auto err =
              dev.copyOverlap(*sent, boxLo(b, r), out, outLo, x.reduce()))
        return err;
    }
    return llvm::Error::success();
  }

  // Through mailboxes where the devices are the host's (pointToPoint).
  bool buffersPointToPoint(const Device &dev) const override {
    return dev.hostAccessible();
  }

  void abort(const std::string &why) override {
    std::lock_guard<std::mutex> lock(m);
    if (!aborted)
      reason = why;
    aborted = true;
    cv.notify_all();
  }

private:
  struct GroupState {
    explicit GroupState(size_t n)
        : barrier(n), inputs(n, nullptr), devices(n, nullptr) {}
    Barrier barrier;
    std::vector<const Tensor *> inputs;
    std::vector<Device *> devices;
  };

  /// Fills \p out from the overlaps of the members' inputs, in rank order.
  static llvm::Error gather(uint32_t device, const plan::Group &g,
                            const plan::Exchange &x, const GroupState &s,
                            Tensor &out, Device &dev) {
    if (auto err = dev.zero(out))
      return err;
    const plan::Box &mine = x.out(int(device));
    if (mine.empty())
      return llvm::Error::success();
    size_t r = out.shape.size();
    std::vector<int64_t> outLo = boxLo(mine, r);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      const plan::Box &b = x.in(int(g.devices(int(k))));
      if (b.empty() || overlapElements(b, mine, r) == 0)
        continue;
      if (!dev.canRead(*s.devices[k]))
        return llvm::createStringError(
            "device " + llvm::Twine(device) + " cannot read device " +
            llvm::Twine(g.devices(int(k))) +
            "'s buffers: the thread transport needs every device in one "
            "address space (the CPU's, or one GPU's)");
      if (auto err = dev.copyOverlap(*s.inputs[k], boxLo(b, r), out, outLo,
                                     x.reduce()))
        return err;
    }
    return llvm::Error::success();
  }
  llvm::Error abortedError() {
    return llvm::createStringError("stopped: " + reason);
  }

  std::mutex m;
  std::condition_variable cv;
  bool aborted = false;
  std::string reason;
  std::map<uint32_t, std::unique_ptr<GroupState>> groups;
  /// Point-to-point copies by (exchange, sender, receiver), oldest first.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>,
           std::deque<std::shared_ptr<const Tensor>>>
      mail;
};
} // namespace

std::unique_ptr<Communicator> makeThreadCommunicator(const plan::Plan &plan) {
  return std::make_unique<ThreadCommunicator>(plan);
}

} // namespace pax::runtime
