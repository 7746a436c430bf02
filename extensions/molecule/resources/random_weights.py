"""Replace a Hugging Face model directory's weights with random ones of the same shapes.

The lab's "bad build" for the gated upgrades: the incumbent's architecture, config,
tokenizer and chat template, so vLLM serves it exactly as it serves the incumbent, but
it answers garbage and the tool-calling gate scores it about 0. Runs on a lab host with
the lab image's vLLM virtualenv (torch, transformers): /opt/vllm/bin/python random_weights.py DIR
"""

import glob
import os
import sys

import torch
import transformers


def main(model_dir):
    config = transformers.AutoConfig.from_pretrained(model_dir)
    for path in glob.glob(os.path.join(model_dir, "*.safetensors*")) + glob.glob(os.path.join(model_dir, "*.bin")):
        os.remove(path)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    model.save_pretrained(model_dir, safe_serialization=True)


if __name__ == "__main__":
    main(sys.argv[1])
