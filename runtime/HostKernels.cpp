//===- HostKernels.cpp - Generated kernels built for the host -------------===//
#include "runtime/HostKernels.h"

#include "runtime/GenerateKernels.h"
#include "runtime/KernelCache.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <dlfcn.h>

#ifndef PAX_HOST_CXX_DEFAULT
#define PAX_HOST_CXX_DEFAULT "c++"
#endif

namespace pax::runtime {

namespace {

const char *const kHostFlags[] = {"-std=c++17", "-O2", "-fPIC", "-shared",
                                  "-w"};

/// The host compiler: $PAX_HOST_CXX, else the one paxc was built with.
llvm::Expected<std::string> hostCompiler() {
  std::string name = PAX_HOST_CXX_DEFAULT;
  if (auto env = llvm::sys::Process::GetEnv("PAX_HOST_CXX"))
    name = *env;
  if (llvm::StringRef(name).contains('/')) {
    if (llvm::sys::fs::can_execute(name))
      return name;
  } else if (auto found = llvm::sys::findProgramByName(name)) {
    return *found;
  }
  return llvm::createStringError(
      "no host compiler '" + name +
      "' to build the plan's generated kernels (set PAX_HOST_CXX, or compile "
      "the plan with paxc --fuse-kernels=false)");
}

/// The program's kernels as one source file.
std::string programSource(const plan::DeviceProgram &prog) {
  std::string src;
  for (const plan::GeneratedKernel &k : prog.kernels())
    src += k.source() + "\n";
  return src;
}

/// Runs \p cxx on \p source, writing the library to \p out; on failure,
/// the compiler's message.
llvm::Error compileLibrary(llvm::StringRef cxx, llvm::StringRef include,
                           const std::string &source, llvm::StringRef out) {
  std::string src = (out + ".cpp").str(), log = (out + ".log").str();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(src, ec);
    if (ec)
      return llvm::createStringError(ec, "cannot write " + src);
    os << source;
  }
  std::string inc = ("-I" + include).str();
  llvm::SmallVector<llvm::StringRef, 12> args = {cxx};
  args.append(std::begin(kHostFlags), std::end(kHostFlags));
  args.append({inc, "-o", out, src});
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(log), llvm::StringRef(log)};
  std::string why;
  int rc =
      llvm::sys::ExecuteAndWait(cxx, args, std::nullopt, redirects, 0, 0, &why);
  std::string said;
  if (auto buf = llvm::MemoryBuffer::getFile(log))
    said = (*buf)->getBuffer().take_front(4000).str();
  llvm::sys::fs::remove(src);
  llvm::sys::fs::remove(log);
  if (rc == 0)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::formatv("the host compiler {0} failed on the plan's generated "
                    "kernels ({1}):\n{2}",
                    cxx, why.empty() ? "exit " + std::to_string(rc) : why, said)
          .str());
}

} // namespace

llvm::Error checkGenerated(const plan::GeneratedKernel &k) {
  if (k.generator() != generatorId())
    return llvm::createStringError(
        "generated kernel " + k.name() + " was written by '" + k.generator() +
        "', this paxrun runs those of '" + generatorId() +
        "': compile the plan again with this paxc (or with "
        "--fuse-kernels=false)");
  if (k.params_size() > gen::kMaxParams)
    return llvm::createStringError(
        llvm::formatv("generated kernel {0} addresses {1} buffers, at most "
                      "{2}",
                      k.name(), k.params_size(), gen::kMaxParams)
            .str());
  return llvm::Error::success();
}

llvm::Expected<std::string> kernelIncludeDir() {
  auto dir = kernelCacheDir();
  if (!dir)
    return dir.takeError();
  llvm::SmallVector<llvm::StringRef, 8> texts;
  for (const KernelHeader &h : kernelHeaders())
    texts.append({h.name, h.text});
  llvm::SmallString<256> inc(*dir);
  llvm::sys::path::append(inc, "include-" + cacheKey(texts).substr(0, 16));
  for (const KernelHeader &h : kernelHeaders()) {
    llvm::SmallString<256> path(inc);
    llvm::sys::path::append(path, h.name);
    auto have = llvm::MemoryBuffer::getFile(path);
    if (have && (*have)->getBuffer() == h.text)
      continue;
    llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path));
    if (auto err = writeAtomically(path, h.text))
      return err;
  }
  return inc.str().str();
}

llvm::Expected<std::unique_ptr<HostKernels>>
HostKernels::load(const plan::DeviceProgram &prog) {
  for (const plan::GeneratedKernel &k : prog.kernels())
    if (auto err = checkGenerated(k))
      return err;
  auto cxx = hostCompiler();
  if (!cxx)
    return cxx.takeError();
  auto include = kernelIncludeDir();
  if (!include)
    return include.takeError();
  std::string source = programSource(prog);
  llvm::SmallVector<llvm::StringRef, 12> keyParts = {"host", *cxx,
                                                     generatorId(), source};
  keyParts.append(std::begin(kHostFlags), std::end(kHostFlags));
  auto path = cachedEntry(cacheKey(keyParts), ".so", [&](llvm::StringRef out) {
    return compileLibrary(*cxx, *include, source, out);
  });
  if (!path)
    return path.takeError();
  std::unique_ptr<HostKernels> hk(new HostKernels());
  hk->library = dlopen(path->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!hk->library)
    return llvm::createStringError("cannot load the generated kernels " +
                                   *path + ": " + dlerror());
  for (const plan::GeneratedKernel &k : prog.kernels()) {
    void *f = dlsym(hk->library, k.name().c_str());
    if (!f)
      return llvm::createStringError("generated kernel " + k.name() +
                                     " is not in " + *path);
    hk->entries[k.name()] = reinterpret_cast<HostKernelEntry>(f);
  }
  return hk;
}

HostKernels::~HostKernels() {
  if (library)
    dlclose(library);
}

} // namespace pax::runtime
