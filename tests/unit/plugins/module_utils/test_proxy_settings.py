# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""``_proxy_settings``: which settings an nginx proxy runs other than the inventory's (issue 35, item 2).

A trial changed the API key and the served model name in the inventory and switched: the switch started
the new engines with them, the proxy kept its own - clients got 401 for 8 minutes, then the new engines
were never in rotation. Each difference here is what the switch now refuses before anything changes,
named by its variable, never with a key."""

from __future__ import annotations

import copy
import json
import re

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_settings as ps

KEY = "lab-key-7f3e9a2c41d86b05"
NEW_KEY = "new-key/0b1c+2d3e~4f5a.6978=="
# upstream.json as the nginx_proxy role renders it (templates/upstream.json.j2)
CHECKER = {
    "candidates": [{"name": "spark-1", "address": "spark-1", "port": 8000, "max_num_seqs": 12},
                   {"name": "spark-2", "address": "spark-2", "port": 8000, "max_num_seqs": 12}],
    "model": "qwen3-next", "api_key": KEY, "interval": 1.0, "probe_timeout": 2.0, "fails": 3, "passes": 2,
    "servers_file": "/etc/nginx/factory-floor-upstream.conf", "state_file": "/run/factory-floor/upstream.json",
    "drain_dir": "/etc/factory-floor/drain", "members_file": "/etc/nginx/factory-floor-members.json",
    "test_command": ["/usr/local/lib/factory-floor/nginx-check"],
    "reload_command": ["/usr/bin/systemctl", "reload", "nginx.service"],
}
NGINX = """#
# Ansible managed
#
events {
    worker_connections 1024;
}
http {
    include /etc/factory-floor/nginx-api-key.conf;
    server {
        listen 8080 reuseport;
        proxy_read_timeout 3600s;
    }
}
"""


def key_map(*keys):
    """The key map as templates/nginx-api-key.conf.j2 writes it (regex_escape is Python's re.escape)."""
    lines = ["#", "# Ansible managed", "#", "map $http_authorization $ff_authorized {", "    default 0;"]
    lines += ['    "~^Bearer %s$" 1;' % re.escape(key) for key in keys]
    return "\n".join(lines + ["}", ""])


def files(checker=None, keys=(KEY,), nginx=NGINX):
    return {"checker": json.dumps(CHECKER if checker is None else checker, indent=2), "keys": key_map(*keys) if keys
            else "", "nginx": nginx}


def changed(**settings):
    checker = copy.deepcopy(CHECKER)
    checker.update(settings)
    return checker


def one(applied, wanted):
    found = ps.compare(applied, wanted)
    assert found["deployed"] is True
    return found["differences"]


def test_the_same_files_differ_in_nothing():
    assert ps.compare(files(), files()) == {"deployed": True, "differences": []}
    # Comments (ansible_managed), blank lines and indentation are not settings.
    assert one(files(nginx=NGINX.replace("# Ansible managed", "# Managed by Ansible, 2026").replace("    ", "\t")),
               files()) == []


def test_a_proxy_never_set_up_is_named_as_such():
    applied = dict(files(), checker=None, keys=None, nginx=None)
    assert ps.compare(applied, files()) == {"deployed": False, "differences": []}


@pytest.mark.parametrize("wanted, expected", [
    (changed(model="qwen3-next-fp8"),
     [("nginx_proxy_model", "qwen3-next", "qwen3-next-fp8", True,
       "nginx_proxy_model (by default vllm_served_model_name): qwen3-next on the proxy, qwen3-next-fp8 in the "
       "inventory")]),
    (changed(interval=1.5),
     [("nginx_proxy_check_interval", 1.0, 1.5, False, "nginx_proxy_check_interval: 1.0 on the proxy, 1.5 in the inventory")]),
    (changed(fails=5, passes=1),
     [("nginx_proxy_check_fails", 3, 5, False, "nginx_proxy_check_fails: 3 on the proxy, 5 in the inventory"),
      ("nginx_proxy_check_passes", 2, 1, False, "nginx_proxy_check_passes: 2 on the proxy, 1 in the inventory")]),
    (changed(candidates=[dict(CHECKER["candidates"][0], port=8001), CHECKER["candidates"][1]]),
     [("vllm_port", 8000, 8001, True, "spark-1's vllm_port: 8000 on the proxy, 8001 in the inventory")]),
    (changed(candidates=[CHECKER["candidates"][0], dict(CHECKER["candidates"][1], address="10.0.0.2", max_num_seqs=16)]),
     [("nginx_proxy_backend_address", "spark-2", "10.0.0.2", True,
       "spark-2's nginx_proxy_backend_address: spark-2 on the proxy, 10.0.0.2 in the inventory"),
      ("vllm_max_num_seqs", 12, 16, False, "spark-2's vllm_max_num_seqs: 12 on the proxy, 16 in the inventory")]),
    (changed(candidates=CHECKER["candidates"] + [{"name": "spark-3", "address": "spark-3", "port": 8000,
                                                  "max_num_seqs": 12}]),
     [("site_engine_group", None, "spark-3", False,
       "the engine spark-3: in the inventory's engine group (site_engine_group), not among the proxy's engines")]),
    (changed(candidates=CHECKER["candidates"][:1]),
     [("site_engine_group", "spark-2", None, False,
       "the engine spark-2: among the proxy's engines, not in the inventory's engine group (site_engine_group)")]),
    ({key: value for key, value in CHECKER.items() if key != "members_file"},
     [("nginx_proxy_balance", "affinity", "least_conn", False,
       "nginx_proxy_balance: affinity on the proxy, least_conn in the inventory")]),
    (changed(state_file="/run/factory-floor/upstream-state.json"),
     [("upstream.json state_file", "/run/factory-floor/upstream.json", "/run/factory-floor/upstream-state.json", False,
       "upstream.json state_file: /run/factory-floor/upstream.json on the proxy, /run/factory-floor/upstream-state.json "
       "in the inventory")]),
], ids=["model", "interval", "fails-passes", "engine-port", "engine-address-and-seqs", "engine-added", "engine-removed",
        "balance", "the-collections-own"])
def test_each_checker_setting_is_named_by_its_variable(wanted, expected):
    found = one(files(), files(checker=wanted))
    assert [(item["setting"], item["applied"], item["wanted"], item["engines"], ps.describe(item))
            for item in found] == expected


@pytest.mark.parametrize("wanted, blocks", [
    (changed(model="renamed"), True),
    (changed(api_key=NEW_KEY), True),
    (changed(candidates=[dict(CHECKER["candidates"][0], port=8001), CHECKER["candidates"][1]]), True),
    (changed(candidates=CHECKER["candidates"] + [dict(CHECKER["candidates"][0], name="spark-3")]), True),
    (changed(state_file="/run/elsewhere.json"), True),
    (changed(interval=1.5, fails=5), False),
    (changed(candidates=[dict(CHECKER["candidates"][0], max_num_seqs=10), CHECKER["candidates"][1]]), False),
    (changed(candidates=CHECKER["candidates"][:1]), False),
    ({key: value for key, value in CHECKER.items() if key != "members_file"}, False),
], ids=["model", "key", "engine-port", "engine-added", "the-switchs-paths", "check-timings", "max-num-seqs",
        "engine-removed", "balance"])
def test_what_a_switch_cannot_go_on_with(wanted, blocks):
    """blocks: the switch, which starts the engines with the inventory's settings and leaves the proxy, cannot go right."""
    found = one(files(), files(checker=wanted, keys=(wanted["api_key"],)))
    assert found and {item["blocks"] for item in found} == {blocks}


@pytest.mark.parametrize("edit, blocks", [
    (lambda text: text.replace("listen 8080", "listen 8081"), True),
    (lambda text: text.replace("listen 8080 reuseport;", "listen 8080 ssl reuseport;\n ssl_certificate /etc/c.pem;"),
     True),
    (lambda text: text.replace("3600s", "600s"), False),
], ids=["port", "tls", "timeout"])
def test_nginx_conf_blocks_where_clients_reach_the_proxy(edit, blocks):
    [found] = one(files(), files(nginx=edit(NGINX)))
    assert found["blocks"] is blocks


def test_a_new_key_is_named_once_and_never_shown():
    found = one(files(), files(checker=changed(api_key=NEW_KEY), keys=(NEW_KEY,)))
    assert [(item["setting"], item["secret"], item["engines"]) for item in found] == [("nginx_proxy_api_key", True, True)]
    assert ps.describe(found[0]) == ("nginx_proxy_api_key (by default vllm_api_key): another key than the proxy's "
                                     "(neither is shown)")
    assert KEY not in repr(found) and NEW_KEY not in repr(found)


@pytest.mark.parametrize("applied_keys, wanted_keys, settings", [
    ((KEY,), (KEY, NEW_KEY), ["nginx_proxy_api_key_next"]),
    ((KEY, NEW_KEY), (KEY,), ["nginx_proxy_api_key_next"]),
    ((KEY, NEW_KEY), (NEW_KEY,), ["nginx_proxy_api_key", "nginx_proxy_api_key_next"]),
    ((KEY,), (), ["nginx_proxy_api_key"]),
], ids=["rotation-started", "rotation-ended", "rotation-finished-in-one-step", "key-removed"])
def test_the_keys_nginx_lets_through(applied_keys, wanted_keys, settings):
    # The checker's own key agrees here: the key map alone says which keys nginx lets through.
    applied = files(keys=applied_keys)
    wanted = files(checker=changed(api_key=wanted_keys[0] if wanted_keys else ""), keys=wanted_keys)
    applied["checker"] = json.dumps(changed(api_key=wanted_keys[0] if wanted_keys else ""))
    found = one(applied, wanted)
    assert [item["setting"] for item in found] == settings
    assert all(item["secret"] and item["applied"] is None and item["wanted"] is None for item in found)
    assert KEY not in repr(found) and NEW_KEY not in repr(found)


def test_a_key_map_missing_on_the_proxy_is_a_key_that_differs():
    applied = dict(files(), keys=None)
    assert [item["setting"] for item in one(applied, files())] == ["nginx_proxy_api_key"]


@pytest.mark.parametrize("key", [KEY, NEW_KEY, "a.b~c+d/e-f_g=", "x"])
def test_the_keys_read_back_as_regex_escape_wrote_them(key):
    assert ps.accepted_keys(key_map(key, "second")) == [key, "second"]


@pytest.mark.parametrize("edit, directives", [
    (lambda text: text.replace("listen 8080", "listen 8081"), ["listen"]),
    (lambda text: text.replace("3600s", "600s").replace("1024", "2048"), ["worker_connections", "proxy_read_timeout"]),
    (lambda text: text.replace("        proxy_read_timeout 3600s;\n", ""), ["proxy_read_timeout"]),
    (lambda text: text.replace("    include /etc/factory-floor/nginx-api-key.conf;\n", ""), ["include"]),
], ids=["port", "two-directives", "a-line-removed", "the-key-map-included"])
def test_nginx_conf_names_the_directives_that_differ(edit, directives):
    found = one(files(), files(nginx=edit(NGINX)))
    assert [(item["setting"], item["directives"], item["engines"]) for item in found] == [("nginx.conf", directives,
                                                                                          False)]
    assert ps.describe(found[0]) == "nginx.conf, its %s lines (nginx_proxy_* settings)" % ", ".join(directives)


def test_a_checker_file_that_is_no_json_is_a_difference():
    found = one(dict(files(), checker="{"), files())
    assert [item["setting"] for item in found] == ["upstream.json"]


def test_the_inventorys_rendering_must_be_json():
    with pytest.raises(ValueError):
        ps.compare(files(), dict(files(), checker="not json"))


def test_every_difference_of_one_proxy_at_once():
    wanted = files(checker=changed(model="renamed", api_key=NEW_KEY, interval=2.0), keys=(NEW_KEY,),
                   nginx=NGINX.replace("listen 8080", "listen 8081"))
    found = one(files(), wanted)
    assert [item["setting"] for item in found] == ["nginx_proxy_model", "nginx_proxy_api_key",
                                                   "nginx_proxy_check_interval", "nginx.conf"]
    assert [item["engines"] for item in found] == [True, True, False, False]
