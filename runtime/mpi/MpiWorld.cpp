//===- MpiWorld.cpp - This process as one rank of an MPI run --------------===//
#include "runtime/mpi/MpiWorld.h"
#include "runtime/mpi/MpiCalls.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>

namespace pax::runtime {

namespace {
/// The tag of the gather's messages on MPI_COMM_WORLD (exchanges run on a
/// communicator of their own).
constexpr int gatherTag = 1;

/// The program's name, which abortMpiWorld's message starts with.
std::string programName;

/// This process's rank, or -1 outside MPI_Init .. MPI_Finalize.
int worldRank() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
} // namespace

llvm::Error mpiError(int code, llvm::StringRef call) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    length = 0;
  std::string what = length ? std::string(text, size_t(length))
                            : "error " + std::to_string(code);
  // The function's name, without its arguments.
  llvm::StringRef name = call.take_until([](char c) { return c == '('; });
  return llvm::createStringError("rank " + llvm::Twine(worldRank()) + ": " +
                                 name.trim() + ": " + what);
}

llvm::Error postBytes(bool send, uint8_t *data, int64_t size, int peer, int tag,
                      MPI_Comm comm, std::vector<MPI_Request> &requests) {
  constexpr int64_t piece = int64_t(1) << 30;
  for (int64_t at = 0; at < size; at += piece) {
    int n = int(std::min(piece, size - at));
    MPI_Request request;
    if (send)
      PAX_MPI_TRY(MPI_Isend(data + at, n, MPI_BYTE, peer, tag, comm, &request));
    else
      PAX_MPI_TRY(MPI_Irecv(data + at, n, MPI_BYTE, peer, tag, comm, &request));
    requests.push_back(request);
  }
  return llvm::Error::success();
}

void abortMpiWorld(llvm::StringRef why) {
  // One write, so ranks sharing a stderr do not interleave their lines.
  llvm::errs() << (llvm::Twine(programName) + ": error: rank " +
                   llvm::Twine(worldRank()) + ": " + why +
                   " (stopping every rank)\n")
                      .str();
  llvm::errs().flush();
  MPI_Abort(MPI_COMM_WORLD, 1);
  // MPI_Abort does not return in practice; the standard allows it to.
  std::_Exit(1);
}

llvm::Expected<std::unique_ptr<MpiWorld>> MpiWorld::start(int &argc,
                                                          char **&argv) {
  int provided = MPI_THREAD_SINGLE;
  if (int code = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
      code != MPI_SUCCESS)
    return llvm::createStringError("MPI_Init_thread failed (error " +
                                   llvm::Twine(code) + ")");
  if (argc > 0)
    programName = llvm::sys::path::filename(argv[0]).str();
  std::unique_ptr<MpiWorld> world(new MpiWorld());
  // From here on the destructor finalizes MPI.
  PAX_MPI_TRY(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  PAX_MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &world->myRank));
  PAX_MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &world->worldSize));
  if (provided < MPI_THREAD_FUNNELED)
    return llvm::createStringError(
        "the MPI library does not support MPI_THREAD_FUNNELED (the CPU "
        "kernels run on threads of their own)");
  return world;
}

MpiWorld::~MpiWorld() {
  if (!started)
    llvm::consumeError(startTogether(false).takeError());
  MPI_Finalize();
}

llvm::Expected<int> MpiWorld::startTogether(bool ready) {
  assert(!started && "every rank agrees to start once");
  started = true;
  int mine = ready ? worldSize : myRank, lowest = 0;
  PAX_MPI_TRY(
      MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return lowest;
}

llvm::Expected<std::vector<std::vector<uint8_t>>>
MpiWorld::gatherOnRoot(std::vector<uint8_t> bytes) {
  std::vector<std::vector<uint8_t>> all;
  std::vector<MPI_Request> requests;
  auto wait = [&]() -> llvm::Error {
    PAX_MPI_TRY(MPI_Waitall(int(requests.size()), requests.data(),
                            MPI_STATUSES_IGNORE));
    requests.clear();
    return llvm::Error::success();
  };
  if (myRank != 0) {
    int64_t size = int64_t(bytes.size());
    PAX_MPI_TRY(MPI_Send(&size, 1, MPI_INT64_T, 0, gatherTag, MPI_COMM_WORLD));
    if (auto err = postBytes(true, bytes.data(), size, 0, gatherTag,
                             MPI_COMM_WORLD, requests))
      return err;
    if (auto err = wait())
      return err;
    return all;
  }
  all.resize(size_t(worldSize));
  all[0] = std::move(bytes);
  for (int r = 1; r < worldSize; ++r) {
    int64_t size = 0;
    PAX_MPI_TRY(MPI_Recv(&size, 1, MPI_INT64_T, r, gatherTag, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE));
    all[size_t(r)].resize(size_t(size));
    if (auto err = postBytes(false, all[size_t(r)].data(), size, r, gatherTag,
                             MPI_COMM_WORLD, requests))
      return err;
    if (auto err = wait())
      return err;
  }
  return all;
}

llvm::Error MpiWorld::broadcastFromRoot(std::vector<uint8_t> &bytes) {
  int64_t size = int64_t(bytes.size());
  PAX_MPI_TRY(MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  bytes.resize(size_t(size));
  constexpr int64_t piece = int64_t(1) << 30;
  for (int64_t at = 0; at < size; at += piece)
    PAX_MPI_TRY(MPI_Bcast(bytes.data() + at, int(std::min(piece, size - at)),
                          MPI_BYTE, 0, MPI_COMM_WORLD));
  return llvm::Error::success();
}

} // namespace pax::runtime
