//===- KernelCacheTest.cpp - Compiled kernels kept on disk ----------------===//
#include "runtime/KernelCache.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace pax::runtime;

namespace {

/// A fresh cache folder for one test, as PAX_KERNEL_CACHE.
class KernelCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> dir;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("pax-kcache", dir));
    folder = dir.str().str();
    setenv("PAX_KERNEL_CACHE", folder.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("PAX_KERNEL_CACHE");
    llvm::sys::fs::remove_directories(folder);
  }

  /// The entry of \p key, built (counted in builds) as \p bytes.
  std::string entry(llvm::StringRef key, llvm::StringRef bytes) {
    auto path = cachedEntry(key, ".bin", [&](llvm::StringRef out) {
      ++builds;
      std::error_code ec;
      llvm::raw_fd_ostream os(out, ec);
      os << bytes;
      return llvm::Error::success();
    });
    EXPECT_TRUE(bool(path)) << llvm::toString(path.takeError());
    return path ? *path : std::string();
  }

  static std::string contents(const std::string &path) {
    auto buf = llvm::MemoryBuffer::getFile(path);
    return buf ? (*buf)->getBuffer().str() : std::string();
  }

  std::string folder;
  int builds = 0;
};

TEST_F(KernelCacheTest, BuildsOnceThenFindsTheEntry) {
  std::string key = cacheKey({"nvrtc", "13.0", "source"});
  std::string path = entry(key, "cubin bytes");
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(contents(path), "cubin bytes");
  EXPECT_EQ(entry(key, "other bytes"), path);
  EXPECT_EQ(builds, 1); // found, not built again
  EXPECT_EQ(contents(path), "cubin bytes");
}

TEST_F(KernelCacheTest, ACorruptedEntryIsBuiltAgain) {
  std::string key = cacheKey({"host", "c++", "source"});
  std::string path = entry(key, "library bytes");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec); // truncated and overwritten
    os << "garbage";
  }
  EXPECT_EQ(entry(key, "library bytes"), path);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(contents(path), "library bytes");
}

TEST_F(KernelCacheTest, AnEntryWithoutItsHashIsBuiltAgain) {
  std::string key = cacheKey({"host", "c++", "other source"});
  std::string path = entry(key, "first");
  llvm::sys::fs::remove(path + ".sha256"); // a foreign file under the name
  entry(key, "second");
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(contents(path), "second");
}

TEST_F(KernelCacheTest, KeysSeparateTheirParts) {
  // Length-prefixed parts: moving a boundary changes the key.
  EXPECT_NE(cacheKey({"ab", "c"}), cacheKey({"a", "bc"}));
  EXPECT_EQ(cacheKey({"ab", "c"}), cacheKey({"ab", "c"}));
  EXPECT_EQ(cacheKey({"x"}).size(), 64u);
}

TEST_F(KernelCacheTest, AFailedBuildLeavesNoEntry) {
  std::string key = cacheKey({"fails"});
  auto path = cachedEntry(key, ".bin", [](llvm::StringRef) {
    return llvm::createStringError("the compiler said no");
  });
  ASSERT_FALSE(bool(path));
  EXPECT_EQ(llvm::toString(path.takeError()), "the compiler said no");
  EXPECT_EQ(entry(key, "now it builds"), folder + "/" + key + ".bin");
  EXPECT_EQ(builds, 1);
}

} // namespace
