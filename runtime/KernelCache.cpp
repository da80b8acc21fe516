//===- KernelCache.cpp - Compiled kernels kept on disk --------------------===//
#include "runtime/KernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

namespace pax::runtime {

namespace {

std::string sha256Hex(llvm::StringRef bytes) {
  auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

/// The hex SHA-256 of the file at \p path, or empty when it cannot be read.
std::string fileHash(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  return buf ? sha256Hex((*buf)->getBuffer()) : std::string();
}

std::string readSmallFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  return buf ? (*buf)->getBuffer().trim().str() : std::string();
}

} // namespace

llvm::Error writeAtomically(llvm::StringRef path, llvm::StringRef text) {
  llvm::SmallString<256> tmp;
  int fd;
  if (auto ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tmp))
    return llvm::createStringError(ec, "kernel cache: cannot write " + path);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path))
    return llvm::createStringError(ec, "kernel cache: cannot write " + path);
  return llvm::Error::success();
}

llvm::Expected<std::string> kernelCacheDir() {
  llvm::SmallString<256> dir;
  if (auto env = llvm::sys::Process::GetEnv("PAX_KERNEL_CACHE")) {
    dir = *env;
  } else if (auto xdg = llvm::sys::Process::GetEnv("XDG_CACHE_HOME")) {
    dir = *xdg;
    llvm::sys::path::append(dir, "paxc", "kernels");
  } else if (llvm::sys::path::home_directory(dir)) {
    llvm::sys::path::append(dir, ".cache", "paxc", "kernels");
  } else { // no home: the system's temporary folder
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, dir);
    llvm::sys::path::append(dir, "paxc-kernels");
  }
  if (auto ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "kernel cache: cannot create " + dir +
                                           " (PAX_KERNEL_CACHE picks another)");
  return dir.str().str();
}

std::string cacheKey(llvm::ArrayRef<llvm::StringRef> parts) {
  llvm::SHA256 h;
  for (llvm::StringRef p : parts) {
    std::string len = std::to_string(p.size()) + ":";
    h.update(llvm::StringRef(len));
    h.update(p);
  }
  return llvm::toHex(h.final(), /*LowerCase=*/true);
}

llvm::Expected<std::string>
cachedEntry(llvm::StringRef key, llvm::StringRef ext,
            llvm::function_ref<llvm::Error(llvm::StringRef path)> build) {
  auto dir = kernelCacheDir();
  if (!dir)
    return dir.takeError();
  llvm::SmallString<256> path(*dir);
  llvm::sys::path::append(path, key + ext);
  std::string sum = (path + ".sha256").str();
  std::string have = fileHash(path);
  if (!have.empty() && have == readSmallFile(sum))
    return path.str().str();
  llvm::SmallString<256> tmp;
  if (auto ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%" + ext, tmp))
    return llvm::createStringError(ec, "kernel cache: cannot write in " + *dir);
  if (auto err = build(tmp)) {
    llvm::sys::fs::remove(tmp);
    return err;
  }
  std::string made = fileHash(tmp);
  if (made.empty())
    return llvm::createStringError("kernel cache: the build wrote nothing to " +
                                   tmp);
  if (auto ec = llvm::sys::fs::rename(tmp, path))
    return llvm::createStringError(ec, "kernel cache: cannot write " + path);
  if (auto err = writeAtomically(sum, made))
    return err;
  return path.str().str();
}

} // namespace pax::runtime
