//===- MpiWorld.h - This process as one rank of an MPI run -----*- C++ -*-===//
//
// Under mpirun every rank runs one device of a plan: rank r runs device r.
// MpiWorld starts and finishes MPI for the process and does what the ranks
// do together besides exchanges (MpiCommunicator.h): agreeing to start, and
// gathering results on rank 0. MPI errors are returned (MPI_ERRORS_RETURN)
// as llvm::Errors that name the call and the rank (MpiCalls.h).
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_MPI_MPIWORLD_H
#define PAX_RUNTIME_MPI_MPIWORLD_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace pax::runtime {

/// Prints \p why (as "<program>: error: rank R: why") and ends every rank of
/// the run with a non-zero status (MPI_Abort), so that no rank waits for one
/// that failed.
[[noreturn]] void abortMpiWorld(llvm::StringRef why);

/// MPI_COMM_WORLD as this process sees it, from MPI_Init to MPI_Finalize.
/// MPI is called from the thread that started it only.
class MpiWorld {
public:
  /// Initializes MPI (MPI_THREAD_FUNNELED: the CPU kernels run on threads
  /// of their own, but only this thread calls MPI).
  static llvm::Expected<std::unique_ptr<MpiWorld>> start(int &argc,
                                                         char **&argv);
  /// Finalizes MPI. A rank that never reached startTogether() takes part
  /// in it first, as not ready, so that the others do not wait for it.
  ~MpiWorld();
  MpiWorld(const MpiWorld &) = delete;
  MpiWorld &operator=(const MpiWorld &) = delete;

  int rank() const { return myRank; }
  int size() const { return worldSize; }

  /// Every rank calls it once, before its first exchange, with whether it
  /// is ready to run. Returns the lowest rank that is not ready, or size()
  /// when every rank is.
  llvm::Expected<int> startTogether(bool ready);

  /// Rank 0 receives every rank's \p bytes, indexed by rank (its own
  /// included); the other ranks send theirs and receive nothing.
  llvm::Expected<std::vector<std::vector<uint8_t>>>
  gatherOnRoot(std::vector<uint8_t> bytes);

  /// Every rank receives rank 0's \p bytes into its own \p bytes.
  llvm::Error broadcastFromRoot(std::vector<uint8_t> &bytes);

  /// Whether startTogether() was called.
  bool hasStarted() const { return started; }

private:
  MpiWorld() = default;

  int myRank = 0, worldSize = 1;
  bool started = false;
};

} // namespace pax::runtime

#endif // PAX_RUNTIME_MPI_MPIWORLD_H
