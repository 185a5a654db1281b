#!/bin/sh
# Submit helpers check shapes at submission (tests/test_shapes.c): matching
# shapes run; each mismatch is refused before anything is submitted, with
# the op, the arguments and their shapes, through sw_failf: a refusal like
# every other (exit 2, the message once, no file:line, no StarPU warning),
# also on two ranks under mpirun.
. "${top_srcdir:-.}/tests/common.sh"
T="$top_builddir/tests/test_shapes"
timeout 120 "$T" valid > "$TMPD/out" 2>&1
rc=$?
[ "$rc" = 0 ] || cat "$TMPD/out"
check "valid shapes: exit $rc" [ "$rc" = 0 ]
refuse() { # refuse CASE "message": exit 2, "starweave: error: message" once, nothing of StarPU's after it
  # (StarPU as a user runs it: make check sets STARPU_SILENT, which would hide its warnings)
  env -u STARPU_SILENT timeout 60 "$T" "$1" > "$TMPD/out" 2>&1
  rc=$?
  n=$(grep -c -x -F -- "starweave: error: $2" "$TMPD/out")
  ok=false
  [ "$rc" = 2 ] && [ "$n" = 1 ] && ! grep -q 'starpu' "$TMPD/out" && ok=true
  $ok || cat "$TMPD/out"
  check "$1: exit $rc (expected 2), printed $n time(s) (expected 1): $2" $ok
}
refuse gemm "sw_gemm: op(A) [64,128] and op(B) [256,32] do not chain (128 != 256)"
refuse gemm_transpose "sw_gemm: op(A) [64,128] and op(B) [32,128] do not chain (128 != 32)"
refuse gemm_c "sw_gemm: C [64,64] is not the shape of op(A) op(B) [64,32]"
refuse gemm_bias "sw_gemm_bias: bias [1,16] must hold one value per column of C [64,32] (16 != 32)"
refuse gemm_types "sw_gemm: A and B must both be fp32 or both bf16, C fp32 (element sizes 2, 4, 4)"
refuse add "sw_add: x [64,128] and y [64,64] differ in shape"
refuse axpy "sw_axpy: x [64,128] and y [128,64] differ in shape"
refuse bias_add "sw_bias_add: bias [1,64] must hold one value per column of x [64,128] (64 != 128)"
refuse copy_flat "sw_copy_flat: x [64,128] and y [1,1000] differ in size (8192 != 1000 elements)"
refuse colsum "sw_colsum: y [1,64] must hold one value per column of x [64,128] (64 != 128)"
refuse gelu "sw_gelu_fwd: x [64,128] and y [64,127] differ in shape"
refuse softmax "sw_softmax_bwd: y [64,128] and dx [63,128] differ in shape"
refuse dropout "sw_dropout_fwd: x [64,128] and y [128,64] differ in shape"
refuse layernorm "sw_layernorm_fwd: mean [128,1] must hold one value per row of x [64,128] (128 != 64)"
refuse rmsnorm "sw_rmsnorm_bwd: w [1,64] must hold one value per column of x [64,128] (64 != 128)"
refuse cast "sw_cast: src [64,128] and dst [64,64] differ in shape"
refuse adamw "sw_adamw: param [64,128] and v [128,64] differ in shape"
refuse copy "sw_copy: dst [64,128] and src [64,64] differ in shape or element size (4, 4 bytes)"
# on two ranks (each refuses the same call): exit 2 from mpirun, the message once
refused 2 "sw_gemm: op(A) [64,128] and op(B) [256,32] do not chain (128 != 256)" "gemm" "$T" gemm
finish
