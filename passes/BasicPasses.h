//===- BasicPasses.h - Clean-up and inspection passes ---------------------===//
#pragma once

#include "passes/Pass.h"

namespace pax {

/// Removes ops whose results nothing returned depends on, and unused globals.
/// Returns the number of ops removed.
unsigned eliminateDeadCode(Module &m);

class DeadCodePass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-dce"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// fuseAttention (FuseAttention.h).
class FuseAttentionPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-fuse-attention"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// fuseGelu (FuseGelu.h).
class FuseGeluPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-fuse-gelu"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// fuseBias (FuseBias.h).
class FuseBiasPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-fuse-bias"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// foldCopies (FoldCopies.h).
class FoldCopiesPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-fold-copies"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
  bool inference = false; ///< `inference=1`: FoldCopiesOptions::inference
};

/// autocast (Autocast.h).
class AutocastPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-autocast"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
  DType low = DType::BF16;    ///< `precision=bf16|fp16`
  bool masterWeights = false; ///< `master-weights=1`
};

/// foldCasts (Autocast.h).
class FoldCastsPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-fold-casts"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
  bool downOnly = false; ///< `down-only=1`: CastFold::DownOnly
};

/// channelsLast (ChannelsLast.h).
class ChannelsLastPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-channels-last"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// fuseKernels (FuseKernels.h).
class FuseKernelsPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-fuse-kernels"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
  bool remarks = false; ///< `remarks=1`: say why each kernel ends
};

class StripNamesPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-strip-names"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// Prints `soap @op-name: n=sample c=parameter ...` per op, for tests.
class PrintSoapRolesPass : public Pass {
public:
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-print-soap-roles"; }
  llvm::Error run(Module &m, PassContext &ctx) override;
};

/// Prints the model summary (text or `format=json`).
class PrintSummaryPass : public Pass {
public:
  explicit PrintSummaryPass(bool json) : json(json) {}
  static llvm::Expected<std::unique_ptr<Pass>> create(const PassOptions &o);
  llvm::StringRef argument() const override { return "pax-print-summary"; }
  llvm::Error run(Module &m, PassContext &ctx) override;

private:
  bool json;
};

} // namespace pax
