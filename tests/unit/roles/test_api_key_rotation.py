# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Rotating the API key with no outage on replicas (issue 33, item 14): the engines accept two keys.

While ``vllm_api_key_next`` is set the engine gets ``--config <root-only YAML>`` whose
``api-key`` lists ``vllm_api_key`` and ``vllm_api_key_next`` - vLLM's own list of accepted
keys, read the way vLLM reads a ``--config`` file (a YAML list becomes ``--api-key K1 K2``),
never on the command line. Checked here without Ansible: the role's vars, the template, the
preflight's refusal of a key that cannot be a Bearer token, and the fingerprint.
"""

from __future__ import annotations

import json
import os

import jinja2
import jinja2.nativetypes
import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_args as va
from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_check as vc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OLD, NEW = "lab-key-7f3e9a2c41d86b05", "k2/new+Key_~.9="


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


VARS = _load("roles", "vllm", "vars", "main.yml")
DEFAULTS = _load("roles", "vllm", "defaults", "main.yml")


def _native(expression, **variables):
    env = jinja2.nativetypes.NativeEnvironment()
    return env.from_string(expression).render(**variables)


def _vllm_reads(text):
    """What vLLM's FlexibleArgumentParser.load_config_file makes of a --config file's lists."""
    args = []
    for key, value in yaml.safe_load(text).items():
        assert isinstance(value, list), key
        args += ["--" + key] + [str(item) for item in value]
    return args


def _render_keys(key, next_key):
    with open(os.path.join(ROOT, "roles", "vllm", "templates", "vllm-keys.yaml.j2"), encoding="utf-8") as handle:
        template = jinja2.Environment().from_string(handle.read())
    return template.render(ansible_managed="managed", vllm_service_name="vllm-replica.service", vllm_api_key=key,
                           vllm_api_key_next=next_key)


def _comment(text):
    return "# " + text


@pytest.mark.parametrize("next_key, config", [
    ("", None),
    (NEW, "/etc/factory-floor/vllm-replica.service.keys.yaml"),
])
def test_the_engine_gets_the_keys_file_only_during_a_rotation(next_key, config):
    assert DEFAULTS["vllm_api_key_next"] == ""
    variables = {"vllm_api_key_next": next_key, "_vllm_config_dir": VARS["_vllm_config_dir"],
                 "vllm_service_name": "vllm-replica.service"}
    variables["_vllm_api_keys_file"] = _native(VARS["_vllm_api_keys_file"], **variables)
    assert _native(VARS["_vllm_settings"]["config"], **variables) == config
    args = va.build_args({"model": "/models/M", "config": config, "api_key": OLD})
    assert args == (["/models/M"] if config is None else ["/models/M", "--config", config])
    # The keys themselves never reach the command line.
    assert OLD not in " ".join(args) and NEW not in " ".join(args)


@pytest.mark.parametrize("key, next_key", [
    (OLD, NEW),
    # Characters YAML would read otherwise unquoted: every key is a JSON string.
    ("a:b #c", "- [x]"),
    ("yes", "007"),
])
def test_vllm_reads_both_keys_from_the_file(key, next_key):
    environment = jinja2.Environment()
    environment.filters["to_json"] = json.dumps
    environment.filters["comment"] = _comment
    with open(os.path.join(ROOT, "roles", "vllm", "templates", "vllm-keys.yaml.j2"), encoding="utf-8") as handle:
        text = environment.from_string(handle.read()).render(
            ansible_managed="managed", vllm_service_name="vllm-replica.service", vllm_api_key=key, vllm_api_key_next=next_key)
    assert _vllm_reads(text) == ["--api-key", key, next_key]


def _refused(key, next_key):
    """The preflight's refusals of a key rotation (factory_floor.llm.vllm_check, check engine), for these keys."""
    errors = vc.check_engine({"inventory_hostname": "spark-1", "vllm_api_key": key, "vllm_api_key_next": next_key}, {})
    return [error for error in errors if error["check"] == "api_key_next"]


@pytest.mark.parametrize("key, accepted", [
    (NEW, True),
    (OLD, True),
    ("abc=", True),
    # What `echo KEY | ansible-vault encrypt_string` makes: refused, never sent.
    ("abc\n", False),
    ("two words", False),
    ('quo"te', False),
    ("=", False),
])
def test_the_preflight_refuses_a_next_key_that_is_not_a_bearer_token(key, accepted):
    assert (not _refused("some-other-key", key)) is accepted


@pytest.mark.parametrize("key, next_key", [(NEW, NEW), ("", NEW), (None, NEW)],
                         ids=["the-same-key", "no-key", "key-unset"])
def test_the_preflight_refuses_a_next_key_equal_to_the_key_or_without_one(key, next_key):
    assert _refused(key, next_key)


def test_no_next_key_is_no_rotation():
    assert not _refused(OLD, "") and not _refused(OLD, None) and not _refused("", "")


def test_the_key_rule_never_shows_the_key():
    [error] = _refused(OLD, "two words " + NEW)
    assert "vllm_api_key_next on spark-1 cannot be used (its value is not shown)" in error["message"]
    assert NEW not in error["message"] and OLD not in error["message"] and "two words" not in error["message"]


def test_the_keys_file_is_root_only_and_a_change_restarts_the_engine():
    tasks = [task for task in _load("roles", "vllm", "tasks", "service_run.yml")
             if "_vllm_api_keys_file" in str(task.get("ansible.builtin.template", {}).get("dest"))]
    write = tasks[0]["ansible.builtin.template"]
    assert (write["owner"], write["group"], write["mode"]) == ("root", "root", "0600")
    assert tasks[0]["no_log"] is True and tasks[0]["diff"] is False
    # The plan reads both keys from the role's variables (engine_plan's action plugin, on the controller).
    assert _load("roles", "vllm", "tasks", "plan.yml")[0]["factory_floor.llm.engine_plan"] == {}
    assert (ep.ROLE_VARIABLES["api_key"], ep.ROLE_VARIABLES["api_key_next"]) == ("vllm_api_key", "vllm_api_key_next")
    # The fingerprint holds the second key's hash only while it is set: nothing restarts on upgrade.
    words = ["/opt/vllm/bin/vllm", "serve", "/models/m"]
    assert ep.fingerprint(words, {}, "old", "") == ep.fingerprint(words, {}, "old")
    assert ep.fingerprint(words, {}, "old", "new") != ep.fingerprint(words, {}, "old")
    # The container reads the file at the same path (mounted read-only with the model).
    keys = "/etc/factory-floor/vllm-replica.service.keys.yaml"
    assert ep.mounts({"model": "/models/m", "config": keys}) == ["/models/m", keys]
