// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase}" | FileCheck %s --check-prefix=FREE
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase mem-limit=0.1}" | FileCheck %s --check-prefix=LIMIT
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase mem-limit=0.1 microbatches=auto recompute=auto zero=auto}" | FileCheck %s --check-prefix=LEVERS
// RUN: paxc-opt %s -p "pax-solve-sharding{gpus=8 cluster=pase mem-limit=0.1 microbatches=auto recompute=auto zero=auto}" | paxc-opt | FileCheck %s --check-prefix=LEVERS
// RUN: not paxc-opt %s -p "pax-solve-sharding{gpus=8 microbatches=3}" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not paxc-opt %s -p "pax-solve-sharding{gpus=8 microbatches=0}" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not paxc-opt %s -p "pax-solve-sharding{gpus=8 zero=4}" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not paxc-opt %s -p "pax-solve-sharding{gpus=8 recompute=x}" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE

// A memory limit forces a different strategy: unconstrained, the matmul
// keeps half of its 64 MiB weight (with gradient and Adam state) per device;
// under 0.1 GiB per device (the step's peak also holds a result's gradient)
// it shards the weight eight ways instead.

// FREE: {config = [2, 2, 2], name = "fc"}
// LIMIT: {config = [1, 8, 1], name = "fc"}

// With the levers the matmul can keep a split of the batch: microbatches
// shrink the activations, ZeRO shards the weight's state over its replicas.
// LEVERS: module @mem attributes {microbatches = {{[0-9]+}}
// LEVERS: name = "fc", zero = {{[1-3]}}}
// DIVIDE: error: pax-solve-sharding: 3 microbatches do not divide the sample dim 'd0' (8192) of op 'act' (relu)
// COUNT: error: pass 'pax-solve-sharding': option microbatches=0: expected auto or a positive count
// ZERO: error: pass 'pax-solve-sharding': option zero=4: expected auto, 0, 1, 2 or 3
// RECOMPUTE: error: pass 'pax-solve-sharding': option recompute=x: expected none, auto or all
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
