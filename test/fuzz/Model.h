//===- Model.h - A small fixed model for harnesses that need one -*- C++
//-*-===//
#pragma once

#include "codegen/plan/Plan.pb.h"
#include "ir/Module.h"

namespace pax::fuzz {

/// An MLP (MatMul, Add, Relu, MatMul, Softmax on a 4x8 input), imported
/// once.
const Module &smallModule();

/// smallModule() compiled for 4 devices under its searched strategy.
const plan::Plan &smallPlan();

} // namespace pax::fuzz
