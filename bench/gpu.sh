#!/usr/bin/env bash
# The GPU run (bench/gpu.py): a GPT-2-small-sized decoder, float32 and bfloat16 products, every measurement printed
# as it lands, interrupted at 460 s (SIGINT: the table of what landed is still printed and written; SIGKILL 20 s
# later), so it ends within 8 minutes. Arguments go to bench/gpu.py; later ones win (e.g. --size=toy --json
# /tmp/toy.json). PYTHON picks the interpreter, GPU_RUN_LIMIT_S the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
size=gpt2_small
for arg in "$@"; do
  case "$arg" in --size=*) size="${arg#--size=}" ;; esac
done
exec timeout --signal=INT --kill-after=20 "${GPU_RUN_LIMIT_S:-460}" "${PYTHON:-python3}" -u bench/gpu.py \
  --size="$size" --json "reports/curvax_models/gpu_${size}.json" "$@"
