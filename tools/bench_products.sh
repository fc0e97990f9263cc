#!/usr/bin/env bash
# The dense product kernels alone, one thread, on the shapes of openWakeWord's embedding and a few
# deeper ones: multiply-adds per second in fp32 and (where the CPU has AVX-512 BF16) bf16, to set
# beside `earshot bench peak`. Compiles the kernels with clang as SwiftPM does (-O2, no errno from math).
#   tools/bench_products.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
k="$root/Sources/CEarshotKernels"
clang -O2 -fno-math-errno -I"$k/include" -I"$k" "$root/tools/products/bench_products.c" "$k/kernels.c" "$k/bf16.c" \
   "$k/memory.c" "$k/peak.c" -o "$work/bench_products" -lm -lpthread
"$work/bench_products"
