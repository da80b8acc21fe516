// RUN: not paxc-opt %s --split-input-file 2>&1 | FileCheck %s

// Each chunk holds one mistake; paxc-opt reports each at its line and
// column (chunks keep the file's line numbers) and goes on with the next.

module @unknown_op_kind {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:18: error: unknown op kind 'frobnicate'
    %0 = compute "frobnicate" iter [d0: 4 par]
        ins(%x[d0])
        outs([d0] : tensor<4xf32>)
    return %0
  }
}

// -----

module @unknown_iteration_dim {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    %0 = compute "relu" iter [d0: 4 par]
        // CHECK: ir_parse.pir:[[@LINE+1]]:16: error: unknown iteration dim 'd1'
        ins(%x[d1])
        outs([d0] : tensor<4xf32>)
    return %0
  }
}

// -----

module @undefined_value {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    %0 = compute "relu" iter [d0: 4 par]
        // CHECK: ir_parse.pir:[[@LINE+1]]:13: error: use of undefined value %z
        ins(%z[d0])
        outs([d0] : tensor<4xf32>)
    return %0
  }
}

// -----

module @undefined_global {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    %0 = compute "add" iter [d0: 4 par]
        // CHECK: ir_parse.pir:[[@LINE+1]]:21: error: use of undefined global @bias
        ins(%x[d0], @bias[d0])
        outs([d0] : tensor<4xf32>)
    return %0
  }
}

// -----

module @bad_element_type {
  // CHECK: ir_parse.pir:[[@LINE+1]]:18: error: unknown element type 'f33'
  func @main(%x: tensor<4xf33>) -> (y: tensor<4xf32>) {
    return %x
  }
}

// -----

module @bad_dimension {
  // CHECK: ir_parse.pir:[[@LINE+1]]:18: error: bad dimension '?' in tensor type
  func @main(%x: tensor<4x?xf32>) -> (y: tensor<4xf32>) {
    return %x
  }
}

// -----

module @duplicate_dim {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:42: error: duplicate iteration dim 'd0'
    %0 = compute "relu" iter [d0: 4 par, d0: 4 par]
        ins(%x[d0])
        outs([d0] : tensor<4xf32>)
    return %0
  }
}

// -----

module @bad_iteration_kind {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:37: error: expected 'par', 'red' or 'seq'
    %0 = compute "relu" iter [d0: 4 bogus]
        ins(%x[d0])
        outs([d0] : tensor<4xf32>)
    return %0
  }
}

// -----

// The parser accepts any map; the verifier, which runs after parsing,
// checks it against the tensor and reports at the op.
module @map_rank {
  func @main(%x: tensor<4x5xf32>) -> (y: tensor<4x5xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: operand 0 has an access map of rank 1 for a tensor of rank 2
    %0 = compute "relu" iter [d0: 4 par, d1: 5 par]
        ins(%x[d0])
        outs([d0, d1] : tensor<4x5xf32>)
    return %0
  }
}

// -----

module @result_map_rank {
  func @main(%x: tensor<4x5xf32>) -> (y: tensor<4x5xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: result 0 has an access map of rank 3 for a tensor of rank 2
    %0 = compute "relu" iter [d0: 4 par, d1: 5 par]
        ins(%x[d0, d1])
        outs([d0, d1, _] : tensor<4x5xf32>)
    return %0
  }
}

// -----

// `_` reads index 0, so it only fits a dim of size 1.
module @broadcast_on_wide_dim {
  func @main(%x: tensor<4x5xf32>) -> (y: tensor<4x5xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: operand 0, dim 1: '_' needs a size-1 dim, not 5
    %0 = compute "relu" iter [d0: 4 par, d1: 5 par]
        ins(%x[d0, _])
        outs([d0, d1] : tensor<4x5xf32>)
    return %0
  }
}

// -----

module @group_span {
  func @main(%x: tensor<12xf32>) -> (y: tensor<3x5xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: operand 0, dim 0: (d0, d1) spans 15 but the dim has 12
    %0 = compute "reshape" iter [d0: 3 par, d1: 5 par]
        ins(%x[(d0, d1)])
        outs([d0, d1] : tensor<3x5xf32>)
    return %0
  }
}

// -----

module @result_not_covered {
  func @main(%x: tensor<8xf32>) -> (y: tensor<8xf32>) {
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: result 0, dim 0: d0 does not write every element of a dim of 8
    %0 = compute "relu" iter [d0: 4 par]
        ins(%x[d0])
        outs([d0] : tensor<8xf32>)
    return %0
  }
}

// -----

module @bad_layout {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    %0 = compute "all_gather" iter [d0: 4 par]
        ins(%x[d0])
        // CHECK: ir_parse.pir:[[@LINE+1]]:55: error: expected 'rep', 'partial' or 'dim(dim, level)' after a digit's size
        outs([d0] : tensor<4xf32>) {layout = layout[2 split]}
    return %0
  }
}

// -----

module @bad_groups {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    %0 = compute "all_gather" iter [d0: 4 par]
        ins(%x[d0])
        // CHECK: ir_parse.pir:[[@LINE+1]]:46: error: bad groups: digit 2 is outside the device space of 2 digits
        outs([d0] : tensor<4xf32>) {groups = groups[space [2, 2], over [2]]}
    return %0
  }
}

// -----

module @nested_fused {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    fused "k0" {
      // CHECK: ir_parse.pir:[[@LINE+1]]:7: error: fused kernels do not nest
      fused "k1" {
        %0 = compute "relu" iter [d0: 4 par]
            ins(%x[d0])
            outs([d0] : tensor<4xf32>)
      }
    }
    return %0
  }
}

// -----

module @empty_fused {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    fused "k0" {
    }
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: fused kernel 'k0' has no ops
    return %x
  }
}

// -----

module @fused_twice {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    fused "k0" {
      %0 = compute "relu" iter [d0: 4 par]
          ins(%x[d0])
          outs([d0] : tensor<4xf32>)
    }
    // CHECK: ir_parse.pir:[[@LINE+1]]:11: error: fused kernel 'k0' appears twice
    fused "k0" {
      %1 = compute "neg" iter [d0: 4 par]
          ins(%0[d0])
          outs([d0] : tensor<4xf32>)
    }
    return %1
  }
}

// -----

module @fused_apart {
  func @main(%x: tensor<4xf32>) -> (y: tensor<4xf32>) {
    %0 = compute "relu" iter [d0: 4 par]
        ins(%x[d0])
        outs([d0] : tensor<4xf32>) {kernel = "k0"}
    %1 = compute "neg" iter [d0: 4 par]
        ins(%0[d0])
        outs([d0] : tensor<4xf32>)
    // CHECK: ir_parse.pir:[[@LINE+1]]:5: error: fused kernel 'k0' has ops that are not consecutive
    %2 = compute "exp" iter [d0: 4 par]
        ins(%1[d0])
        outs([d0] : tensor<4xf32>) {kernel = "k0"}
    return %2
  }
}
