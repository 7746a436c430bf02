# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Whole-module runs of ``factory_floor.llm.proxy_settings_info`` on a proxy's files in a tmp dir. What each
difference says is tests/unit/plugins/module_utils/test_proxy_settings.py's; here: the files are read, nothing is
written, no key is returned, check mode runs in full, and the documentation is the argument spec."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.modules import proxy_settings_info as module
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_proxy_settings import (
    CHECKER, KEY, NEW_KEY, NGINX, changed, key_map)


@pytest.fixture
def proxy(tmp_path):
    """The files as the role wrote them, and the module's arguments that point at them."""
    (tmp_path / "upstream.json").write_text(json.dumps(CHECKER))
    (tmp_path / "keys.conf").write_text(key_map(KEY))
    (tmp_path / "nginx.conf").write_text(NGINX)
    return {"checker_config_path": str(tmp_path / "upstream.json"), "key_map_path": str(tmp_path / "keys.conf"),
            "nginx_conf_path": str(tmp_path / "nginx.conf"),
            "checker_config": json.dumps(CHECKER, indent=1), "key_map": key_map(KEY), "nginx_conf": NGINX}


def _contents(args):
    return [open(args[key], encoding="utf-8").read() for key in ("checker_config_path", "key_map_path", "nginx_conf_path")]


@pytest.mark.parametrize("check_mode", [False, True])
def test_the_proxy_as_the_inventory_says(run_module, proxy, check_mode):
    before = _contents(proxy)
    code, result = run_module(module, dict(proxy, _ansible_check_mode=check_mode))
    assert code == 0, result
    assert result["changed"] is False and result["deployed"] is True and result["differences"] == []
    assert _contents(proxy) == before


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_new_key_and_model_name_are_named_never_shown(run_module, proxy, check_mode):
    args = dict(proxy, checker_config=json.dumps(changed(model="renamed", api_key=NEW_KEY)), key_map=key_map(NEW_KEY),
                nginx_conf=NGINX.replace("listen 8080", "listen 8081"), _ansible_check_mode=check_mode)
    code, result = run_module(module, args)
    assert code == 0, result
    assert [(item["setting"], item["applied"], item["wanted"]) for item in result["differences"]] == [
        ("nginx_proxy_model", "qwen3-next", "renamed"), ("nginx_proxy_api_key", None, None), ("nginx.conf", None, None)]
    assert result["differences"][2]["directives"] == ["listen"]
    assert KEY not in json.dumps(result) and NEW_KEY not in json.dumps(result)


def test_a_proxy_never_set_up(run_module, proxy, tmp_path):
    os.remove(proxy["checker_config_path"])
    os.remove(proxy["key_map_path"])
    code, result = run_module(module, proxy)
    assert code == 0, result
    assert result["deployed"] is False and result["differences"] == []


def test_the_inventorys_rendering_must_be_the_checkers_json(run_module, proxy):
    code, result = run_module(module, dict(proxy, checker_config="{{ not rendered }}"))
    assert code == 1
    assert result["msg"].startswith("checker_config is not the membership checker's JSON configuration")


def test_the_documentation_is_the_argument_spec():
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert set(documented) == {"checker_config_path", "checker_config", "key_map_path", "key_map", "nginx_conf_path",
                               "nginx_conf"}
    source = open(module.__file__, encoding="utf-8").read()
    for name, option in documented.items():
        if "default" in option:
            assert "%s=dict(type=\"%s\", default=%s" % (name, option["type"], json.dumps(option["default"])) in source, name
    # The keys' texts are never logged.
    assert 'checker_config=dict(type="str", required=True, no_log=True)' in source
    assert 'key_map=dict(type="str", default="", no_log=True)' in source
