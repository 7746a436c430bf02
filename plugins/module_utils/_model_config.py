# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a model's ``config.json`` says that decides which engine settings are safe.

Pure logic, standard library only (the layer reading is ``_kv_cache``'s). A hybrid
model keeps a recurrent state per request in some of its layers (Gated DeltaNet,
Mamba) - Qwen3-Next, Qwen3.5/3.6, Nemotron-H, Jamba. On those, vLLM's prefix caching
together with MTP speculative decoding has open corruption reports: tool calls dropped
or leaked and accuracy down 20 % on cache hits, while either alone is clean
(vllm-project/vllm#43559, #53912 still in 0.28.0, #47194). :func:`engine_problems`
refuses that pair unless the operator confirms it.
"""

from __future__ import annotations

from ansible_collections.factory_floor.llm.plugins.module_utils import _kv_cache as kv

#: vLLM's MTP speculative methods (vllm/config/speculative.py, MTP_MODEL_TYPES and "mtp").
MTP_METHODS = ("mtp", "qwen3_next_mtp", "deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "longcat_flash_mtp",
               "qwen3_5_mtp", "nemotron_h_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp")
_MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers", "mtp_num_layers")


def summary(config):
    """``{model_type, architectures, layers, recurrent_layers, hybrid, attention_heads, mtp_layers, vocab_size}`` of a
    config.

    ``hybrid`` is None when the layers cannot be read (an unknown layer type); ``vocab_size`` None when the config
    names none.
    """
    config = config if isinstance(config, dict) else {}
    text = kv.text_config(config)
    out = {
        "model_type": str(config.get("model_type") or text.get("model_type") or ""),
        "architectures": [str(a) for a in config.get("architectures") or []],
        "layers": None, "recurrent_layers": None, "hybrid": None,
        "attention_heads": text.get("num_attention_heads"),
        "mtp_layers": next((int(text[k]) for k in _MTP_LAYER_KEYS if isinstance(text.get(k), int)), 0),
        "vocab_size": next((v for v in (text.get("vocab_size"), config.get("vocab_size"))
                            if isinstance(v, int) and not isinstance(v, bool) and v > 0), None),
    }
    try:
        kinds, _source = kv.layer_kinds(text)
    except (kv.KVPlanError, TypeError, ValueError):
        return out
    recurrent = sum(1 for kind in kinds if kind == "recurrent")
    out.update(layers=len(kinds), recurrent_layers=recurrent, hybrid=recurrent > 0)
    return out


def is_mtp(speculative_config):
    method = str((speculative_config or {}).get("method") or "").lower()
    return method in MTP_METHODS or method.endswith("_mtp")


def engine_problems(model, speculative_config, enable_prefix_caching, allow_mtp_prefix_caching=False):
    """What the engine settings would do wrong on this model: a list of sentences.

    ``enable_prefix_caching`` None is vLLM's default, which turns it on (for hybrid
    models too, in ``align`` cache mode).
    """
    problems = []
    if (model.get("hybrid") and is_mtp(speculative_config) and enable_prefix_caching is not False
            and not allow_mtp_prefix_caching):
        problems.append(
            "MTP speculative decoding (vllm_speculative_config method %s) with prefix caching (%s) on a hybrid model "
            "(%s: %s of %s layers keep a recurrent state) corrupts outputs on cache hits in open vLLM reports "
            "(vllm-project/vllm#43559, #53912, #47194: tool calls dropped, accuracy down 20 %%): set "
            "vllm_enable_prefix_caching: false (keep MTP), or drop MTP, or confirm the pair with "
            "vllm_allow_mtp_prefix_caching: true" % (
                (speculative_config or {}).get("method"),
                "vllm_enable_prefix_caching: true" if enable_prefix_caching else "vLLM's default, on",
                model.get("model_type") or "this model", model.get("recurrent_layers"), model.get("layers")))
    return problems
