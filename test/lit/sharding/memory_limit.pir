// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase}" | FileCheck %s --check-prefix=FREE
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase mem-limit=0.1}" | FileCheck %s --check-prefix=LIMIT

// A memory limit forces a different strategy: unconstrained, the matmul
// keeps half of its 64 MiB weight (with gradient and Adam state) per device;
// under 0.1 GiB per device (the step's peak also holds a result's gradient)
// it shards the weight eight ways instead.

// FREE: {config = [2, 2, 2], name = "fc"}
// LIMIT: {config = [1, 8, 1], name = "fc"}
module @mem {
  param @w : tensor<4096x4096xf32> = fill(0.1)
  func @main(%x: tensor<8192x4096xf32>) -> (y: tensor<8192x4096xf32>) {
    %0 = compute "relu" iter [d0: 8192 par, d1: 4096 par]
        ins(%x[d0, d1])
        outs([d0, d1] : tensor<8192x4096xf32>) {name = "act"}
    %1 = compute "matmul" iter [m: 8192 par, n: 4096 par, k: 4096 red]
        ins(%0[m, k], @w[k, n])
        outs([m, n] : tensor<8192x4096xf32>) {name = "fc"}
    return %1
  }
}
