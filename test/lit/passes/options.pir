// RUN: paxc-opt %s --split-input-file -p pax-dce --print-ir-after-all | FileCheck %s
// RUN: paxc-opt %s --split-input-file -p pax-dce,pax-strip-names --print-ir-after=pax-strip-names | FileCheck %s --check-prefix=AFTER
// RUN: paxc-opt %s --split-input-file -p 'pax-print-summary{format=json}' | FileCheck %s --check-prefix=JSON
// RUN: not paxc-opt %s -p pax-nope 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not paxc-opt %s -p 'pax-dce{level=3}' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not paxc-opt %s -p 'pax-print-summary{format=xml}' 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not paxc-opt %s -p 'pax-dce{' 2>&1 | FileCheck %s --check-prefix=BRACE
// RUN: not paxc-opt %s --print-ir-after=pax-nope 2>&1 | FileCheck %s --check-prefix=AFTERBAD
// RUN: not paxc-opt %t.missing 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: paxc-opt --list-passes | FileCheck %s --check-prefix=LIST

// CHECK: // -----// IR after pax-dce //----- //
// CHECK: module @first
// CHECK: // -----
// CHECK: // -----// IR after pax-dce //----- //
// CHECK: module @second
// AFTER-NOT: IR after pax-dce
// AFTER: // -----// IR after pax-strip-names //----- //
// JSON: "parameters": 0,
// JSON: // -----
// JSON: "parameters": 0,
// UNKNOWN: error: unknown pass 'pax-nope' (paxc-opt --list-passes lists them)
// OPTION: error: pass 'pax-dce' has no option 'level'
// VALUE: error: pass 'pax-print-summary': format must be text or json, not 'xml'
// BRACE: error: pass 'pax-dce': missing '}' after its options
// AFTERBAD: error: --print-ir-after: unknown pass 'pax-nope'
// MISSING: error: cannot read '{{.*}}.missing'
// LIST: pax-dce
// LIST: pax-print-soap-roles

module @first {
  func @main(%x: tensor<2xf32>) -> (y: tensor<2xf32>) {
    %0 = compute "relu" iter [d0: 2 par]
        ins(%x[d0])
        outs([d0] : tensor<2xf32>)
    return %0
  }
}

// -----

module @second {
  func @main(%x: tensor<3xf32>) -> (y: tensor<3xf32>) {
    %0 = compute "neg" iter [d0: 3 par]
        ins(%x[d0])
        outs([d0] : tensor<3xf32>)
    return %0
  }
}
