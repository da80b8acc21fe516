// RUN: paxc-opt %s --split-input-file -p pax-fuse-gelu | FileCheck %s
// The pass takes no options; paxc's flag takes a boolean.
// RUN: not paxc-opt %s -p 'pax-fuse-gelu{all=1}' 2>&1 | FileCheck %s --check-prefix=OPTION
// OPTION: error: pass 'pax-fuse-gelu' has no option 'all'
// RUN: not paxc %s --fuse-gelu=maybe 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: fuse-gelu{{.*}}maybe

// BERT's GELU (x / sqrt(2), erf, + 1, * x, * 0.5) becomes one gelu op,
// approximate "none", in place of the last op of the group, reading x
// through that op's map; GPT-2's (x^3 * 0.044715 + x, * sqrt(2 / pi),
// tanh, + 1, * 0.5 * x, grouped otherwise) one of approximate "tanh". The
// group is found by what it computes: the order of the operands and the
// grouping of the products do not matter.
// CHECK-LABEL: module @forms
// CHECK:      %0 = compute "gelu" iter [d0: 2 par, d1: 8 par]
// CHECK-NEXT:     ins(%x[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x8xf32>) {approximate = "none", name = "bert/Mul_1"}
// CHECK-NEXT: %1 = compute "gelu" iter [d0: 2 par, d1: 8 par]
// CHECK-NEXT:     ins(%x[d0, d1])
// CHECK-NEXT:     outs([d0, d1] : tensor<2x8xf32>) {approximate = "tanh", name = "gpt2/Mul_3"}
// CHECK-NEXT: return %0, %1
module @forms {
  const @sqrt2 : tensor<f32> = fill(1.4142135)
  const @one : tensor<f32> = fill(1.0)
  const @half : tensor<f32> = fill(0.5)
  const @three : tensor<f32> = fill(3.0)
  const @a : tensor<f32> = fill(0.044715)
  const @k : tensor<f32> = fill(0.7978846)
  func @main(%x: tensor<2x8xf32>) -> (y: tensor<2x8xf32>, z: tensor<2x8xf32>) {
    %0 = compute "div" iter [d0: 2 par, d1: 8 par]
        ins(%x[d0, d1], @sqrt2[])
        outs([d0, d1] : tensor<2x8xf32>) {name = "bert/Div"}
    %1 = compute "erf" iter [d0: 2 par, d1: 8 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "bert/Erf"}
    %2 = compute "add" iter [d0: 2 par, d1: 8 par]
        ins(@one[], %1[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "bert/Add"}
    %3 = compute "mul" iter [d0: 2 par, d1: 8 par]
        ins(%x[d0, d1], %2[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "bert/Mul"}
    %4 = compute "mul" iter [d0: 2 par, d1: 8 par]
        ins(%3[d0, d1], @half[])
        outs([d0, d1] : tensor<2x8xf32>) {name = "bert/Mul_1"}
    %5 = compute "mul" iter [d0: 2 par, d1: 8 par]
        ins(@half[], %x[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Mul"}
    %6 = compute "pow" iter [d0: 2 par, d1: 8 par]
        ins(%x[d0, d1], @three[])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Pow"}
    %7 = compute "mul" iter [d0: 2 par, d1: 8 par]
        ins(@a[], %6[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Mul_1"}
    %8 = compute "add" iter [d0: 2 par, d1: 8 par]
        ins(%x[d0, d1], %7[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Add"}
    %9 = compute "mul" iter [d0: 2 par, d1: 8 par]
        ins(%8[d0, d1], @k[])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Mul_2"}
    %10 = compute "tanh" iter [d0: 2 par, d1: 8 par]
        ins(%9[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Tanh"}
    %11 = compute "add" iter [d0: 2 par, d1: 8 par]
        ins(%10[d0, d1], @one[])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Add_1"}
    %12 = compute "mul" iter [d0: 2 par, d1: 8 par]
        ins(%5[d0, d1], %11[d0, d1])
        outs([d0, d1] : tensor<2x8xf32>) {name = "gpt2/Mul_3"}
    return %4, %12
  }
}

// -----

// Left as they are: a GELU whose erf is also returned (an intermediate
// read outside the group), a function that is not GELU (tanh of x itself),
// and a GELU of x read through another map (transposed) in one op.
// CHECK-LABEL: module @kept
// CHECK-NOT:  "gelu"
module @kept {
  const @sqrt2 : tensor<f32> = fill(1.4142135)
  const @one : tensor<f32> = fill(1.0)
  const @half : tensor<f32> = fill(0.5)
  func @main(%x: tensor<4x4xf32>) -> (y: tensor<4x4xf32>, e: tensor<4x4xf32>, t: tensor<4x4xf32>, u: tensor<4x4xf32>) {
    %0 = compute "div" iter [d0: 4 par, d1: 4 par]
        ins(%x[d0, d1], @sqrt2[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "shared/Div"}
    %1 = compute "erf" iter [d0: 4 par, d1: 4 par]
        ins(%0[d0, d1])
        outs([d0, d1] : tensor<4x4xf32>) {name = "shared/Erf"}
    %2 = compute "add" iter [d0: 4 par, d1: 4 par]
        ins(%1[d0, d1], @one[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "shared/Add"}
    %3 = compute "mul" iter [d0: 4 par, d1: 4 par]
        ins(%x[d0, d1], %2[d0, d1])
        outs([d0, d1] : tensor<4x4xf32>) {name = "shared/Mul"}
    %4 = compute "mul" iter [d0: 4 par, d1: 4 par]
        ins(%3[d0, d1], @half[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "shared/Mul_1"}
    %5 = compute "tanh" iter [d0: 4 par, d1: 4 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<4x4xf32>) {name = "not/Tanh"}
    %6 = compute "add" iter [d0: 4 par, d1: 4 par]
        ins(%5[d0, d1], @one[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "not/Add"}
    %7 = compute "mul" iter [d0: 4 par, d1: 4 par]
        ins(%x[d0, d1], %6[d0, d1])
        outs([d0, d1] : tensor<4x4xf32>) {name = "not/Mul"}
    %8 = compute "mul" iter [d0: 4 par, d1: 4 par]
        ins(%7[d0, d1], @half[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "not/Mul_1"}
    %9 = compute "div" iter [d0: 4 par, d1: 4 par]
        ins(%x[d0, d1], @sqrt2[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "moved/Div"}
    %10 = compute "erf" iter [d0: 4 par, d1: 4 par]
        ins(%9[d0, d1])
        outs([d0, d1] : tensor<4x4xf32>) {name = "moved/Erf"}
    %11 = compute "add" iter [d0: 4 par, d1: 4 par]
        ins(%10[d0, d1], @one[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "moved/Add"}
    %12 = compute "mul" iter [d0: 4 par, d1: 4 par]
        ins(%x[d1, d0], %11[d0, d1])
        outs([d0, d1] : tensor<4x4xf32>) {name = "moved/Mul"}
    %13 = compute "mul" iter [d0: 4 par, d1: 4 par]
        ins(%12[d0, d1], @half[])
        outs([d0, d1] : tensor<4x4xf32>) {name = "moved/Mul_1"}
    return %4, %1, %8, %13
  }
}
