# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The options vllm_metrics and workload_profile share: one argument spec, one doc fragment."""

from __future__ import annotations

import yaml

from ansible_collections.factory_floor.llm.plugins.doc_fragments.engine_metrics import ModuleDocFragment
from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_metrics as em
from ansible_collections.factory_floor.llm.plugins.module_utils._host.vllm_metrics import DEFAULT_TIMEOUT
from ansible_collections.factory_floor.llm.plugins.modules import vllm_metrics, workload_profile


def test_spec_is_copied_and_extended():
    spec = em.engine_metrics_spec(window={"type": "float"})
    assert set(spec) == {"engines", "timeout", "api_key", "window"}
    spec["engines"]["options"]["name"]["required"] = False
    assert em.ENGINE_METRICS_SPEC["engines"]["options"]["name"]["required"] is True
    assert em.ENGINE_METRICS_SPEC["api_key"]["no_log"] is True


def test_fragment_documents_the_shared_options_and_both_modules_use_it():
    fragment = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    assert set(fragment) == {"timeout"}
    assert fragment["timeout"]["default"] == DEFAULT_TIMEOUT
    for module in (vllm_metrics, workload_profile):
        doc = yaml.safe_load(module.DOCUMENTATION)
        assert "factory_floor.llm.engine_metrics" in doc["extends_documentation_fragment"]
        # engines and api_key are each module's own text (engines names what the module returns per engine)
        assert {"engines", "api_key"} <= set(doc["options"]) and not set(fragment) & set(doc["options"])
