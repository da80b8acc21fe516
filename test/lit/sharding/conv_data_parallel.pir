// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase}" | FileCheck %s

// A large-batch conv net with small weights goes data parallel: every op
// splits its sample dim n over the 8 devices.

// CHECK: {config = [8, 1, 1, 1, 1, 1, 1], name = "conv1"}
// CHECK: {config = [8, 1, 1, 1], name = "relu1"}
// CHECK: {config = [8, 1, 1, 1, 1, 1, 1], name = "conv2"}
module @convnet {
  param @w1 : tensor<64x3x3x3xf32> = fill(0.1)
  param @w2 : tensor<64x64x3x3xf32> = fill(0.1)
  func @main(%x: tensor<256x3x32x32xf32>) -> (y: tensor<256x64x32x32xf32>) {
    %0 = compute "conv" iter [n: 256 par, co: 64 par, oh: 32 par, ow: 32 par, ci: 3 red, kh: 3 red, kw: 3 red]
        ins(%x[n, ci, oh + kh - 1, ow + kw - 1], @w1[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<256x64x32x32xf32>) {name = "conv1"}
    %1 = compute "relu" iter [d0: 256 par, d1: 64 par, d2: 32 par, d3: 32 par]
        ins(%0[d0, d1, d2, d3])
        outs([d0, d1, d2, d3] : tensor<256x64x32x32xf32>) {name = "relu1"}
    %2 = compute "conv" iter [n: 256 par, co: 64 par, oh: 32 par, ow: 32 par, ci: 64 red, kh: 3 red, kw: 3 red]
        ins(%1[n, ci, oh + kh - 1, ow + kw - 1], @w2[co, ci, kh, kw])
        outs([n, co, oh, ow] : tensor<256x64x32x32xf32>) {name = "conv2"}
    return %2
  }
}
