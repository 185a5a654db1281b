#!/bin/sh
# Offload transfers against compute, from StarPU's own FxT trace: one
# gpt_train run with --offload under a main-RAM budget (the seq 512 model of
# bench/recompute.sh), traced with STARPU_FXT_TRACE, turned into paje.trace
# by starpu_fxt_tool, and bench/paje_overlap.py measures how much of the
# memory nodes' copy time ran while a worker executed a task.
# Needs a starweave build against a StarPU with FxT (autotools/build-starpu.sh;
# .ci/run makes one in build-fxt).
# usage: BUILD=build-fxt STARPU_PREFIX=<prefix> bench/offload_trace.sh [steps] [budget MiB]
set -eu
steps=${1:-3}
budget=${2:-40}
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${BUILD:-.}" && pwd)
[ -x "$BUILD/examples/gpt_train" ] || { echo "offload_trace: set BUILD to a build directory" >&2; exit 2; }
tool=${STARPU_PREFIX:+$STARPU_PREFIX/bin/}starpu_fxt_tool
command -v "$tool" > /dev/null || { echo "offload_trace: no starpu_fxt_tool (set STARPU_PREFIX)" >&2; exit 2; }
. "$here/common.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
STARPU_FXT_TRACE=1 STARPU_FXT_PREFIX="$dir/" STARPU_NCUDA=0 "$BUILD/examples/gpt_train" --layers 4 --hidden 256 \
  --heads 8 --seq 512 --batch 2 --steps "$steps" --ncpus 2 --offload --offload-budget-mb "$budget" \
  --memory-report --log "$dir/log.csv" --quiet | grep -E 'ms/step|memory: rank'
ls prof_file_* > /dev/null 2>&1 || { echo "offload_trace: no FxT trace written: is StarPU built with FxT?" >&2; exit 1; }
"$tool" -i prof_file_* > tool.log 2>&1
python3 "$here/paje_overlap.py" paje.trace mm0="main RAM" mm1="disk"
