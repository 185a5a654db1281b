#!/bin/sh
# The GPU kit's library check (autotools/gpu-kit.sh --check): every ELF file
# of the kit finds its libraries in the kit, the base system or CUDA, and
# the kit is within 48 MiB. The kit is built by hand (autotools/gpu-kit.sh,
# minutes), never by make check: SKIP (exit 77) when it is not there.
# SW_GPU_KIT: the kit folder (default: gpu-kit in the source tree).
kit=${SW_GPU_KIT:-${top_srcdir:-.}/gpu-kit}
sh "${top_srcdir:-.}/autotools/gpu-kit.sh" --check --out "$kit"
