// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase}" | FileCheck %s
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase solver=data-parallel}" | FileCheck %s --check-prefix=DATA
// RUN: not paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase mem-limit=0.25}" 2>&1 | FileCheck %s --check-prefix=NOFIT

// A tiny batch through a huge weight goes parameter parallel: the 1 GiB
// weight is split over its output channels, not replicated. Data
// parallelism can only split the batch of 2. A 0.25 GiB limit cannot hold
// even an eighth of the weight with its gradient and optimizer state.

// CHECK: {config = [1, 8, 1], name = "fc"}
// DATA: {config = [2, 1, 1], name = "fc"}
// NOFIT: error: pax-solve-sharding: no strategy fits in 0.25 GiB per device; the leanest one found needs 0.500 GiB
module @big {
  param @w : tensor<16384x16384xf32> = fill(0.1)
  func @main(%x: tensor<2x16384xf32>) -> (y: tensor<2x16384xf32>) {
    %0 = compute "matmul" iter [m: 2 par, n: 16384 par, k: 16384 red]
        ins(%x[m, k], @w[k, n])
        outs([m, n] : tensor<2x16384xf32>) {name = "fc"}
    return %0
  }
}
