//===- MpiCalls.h - MPI calls as llvm::Errors, byte messages ----*- C++ -*-===//
//
// For the MPI transport's own sources (runtime/mpi): every MPI call goes
// through PAX_MPI_TRY, which turns a failure into an llvm::Error naming the
// call and the rank.
//
//===----------------------------------------------------------------------===//
#ifndef PAX_RUNTIME_MPI_MPICALLS_H
#define PAX_RUNTIME_MPI_MPICALLS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace pax::runtime {

/// MPI error \p code of \p call as an error naming this process's rank:
/// "rank 1: MPI_Isend: <MPI's text>".
llvm::Error mpiError(int code, llvm::StringRef call);

/// Returns mpiError(...) from the enclosing function when the MPI call
/// fails.
#define PAX_MPI_TRY(call)                                                      \
  do {                                                                         \
    if (int paxMpiCode = (call); paxMpiCode != MPI_SUCCESS)                    \
      return ::pax::runtime::mpiError(paxMpiCode, #call);                      \
  } while (false)

/// Posts a nonblocking send (\p send) or receive of the \p size bytes at
/// \p data with rank \p peer of \p comm, in pieces that MPI's int counts
/// hold (sender and receiver cut the same size the same way), and appends
/// the requests to \p requests.
llvm::Error postBytes(bool send, uint8_t *data, int64_t size, int peer, int tag,
                      MPI_Comm comm, std::vector<MPI_Request> &requests);

} // namespace pax::runtime

#endif // PAX_RUNTIME_MPI_MPICALLS_H
