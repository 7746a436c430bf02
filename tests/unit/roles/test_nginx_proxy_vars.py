# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nginx_proxy role's checker watchdog and unit check, now filters: each renders exactly what the Jinja it
replaced rendered (kept here as it stood in roles/nginx_proxy/vars/main.yml), through Ansible's own templar."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.filter.nginx_proxy_checker_watchdog_sec import nginx_proxy_checker_watchdog_sec
from ansible_collections.factory_floor.llm.plugins.filter.systemd_verify_command import systemd_verify_command
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

OLD = {
    "_nginx_proxy_checker_watchdog_sec": """\
{{ [120, 4 * ((nginx_proxy_check_interval | float) + 3 * (nginx_proxy_probe_timeout | float) * (nginx_proxy_backends | length)
             + 20)] | max | int }}""",
    "_nginx_proxy_checker_unit_validate": """\
/bin/sh -c 'd=$(mktemp -d) && cp %s "$d/{{ _nginx_proxy_checker_unit }}" \
&& systemd-analyze verify --man=no "$d/{{ _nginx_proxy_checker_unit }}"; r=$?; rm -rf "$d"; exit $r'""",
}

ROLE = role_variables("nginx_proxy")
HOSTS = {"spark-a": {"inventory_hostname": "spark-a"}, "spark-b": {"inventory_hostname": "spark-b"}}

INVENTORIES = [
    {},
    {"nginx_proxy_check_interval": 30},
    {"nginx_proxy_check_interval": "7.5", "nginx_proxy_probe_timeout": "2.25"},
    {"nginx_proxy_check_interval": 1, "nginx_proxy_probe_timeout": 1, "nginx_proxy_backends": []},
    {"nginx_proxy_check_interval": 5, "nginx_proxy_probe_timeout": 10, "nginx_proxy_backends": ["a", "b", "c", "d"]},
    {"nginx_proxy_check_interval": 5, "nginx_proxy_probe_timeout": 0.1, "nginx_proxy_backends": ["a"] * 100},
    {"nginx_proxy_check_interval": "soon", "nginx_proxy_probe_timeout": None},
    {"nginx_proxy_check_interval": 2.9, "nginx_proxy_probe_timeout": 3.3, "nginx_proxy_backends": ["a", "b"]},
    {"_nginx_proxy_checker_unit": "checker two.service"},
]


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("name", sorted(OLD))
def test_the_filter_renders_what_the_old_jinja_rendered(name, inventory):
    variables = dict(ROLE, groups={"gb10": ["spark-a", "spark-b"]}, hostvars=HOSTS, site_engine_group="gb10")
    variables.update(inventory)
    tpl = with_filters(Templar(loader=DataLoader(), variables=variables))
    old = tpl.template(trust_as_template(OLD[name]))
    new = tpl.template(trust_as_template("{{ %s }}" % name))
    assert new == old and type(new) is type(old)


@pytest.mark.parametrize("interval, timeout, backends, expected", [
    (5, 10, ["a", "b"], 340), (1, 1, [], 120), (1, 1, ["a"], 120), (10, 5, ["a"], 180), ("x", None, ["a"], 120),
])
def test_the_watchdog_is_four_slowest_looks_at_least_120(interval, timeout, backends, expected):
    assert nginx_proxy_checker_watchdog_sec(interval, timeout, backends) == expected


def test_the_unit_check_fails_on_warnings_only_when_asked():
    plain = systemd_verify_command("u.service")
    assert plain.endswith('exit $r\'') and "grep" not in plain
    strict = systemd_verify_command("u.service", warnings=True)
    assert strict.endswith('grep -q "u.service:[0-9]"\'')


# The proxy's members (issue 37): each engine group's first host, the grouping read from site_engine_groups.
OLD_BACKENDS = "{{ groups[site_engine_group] | map('extract', hostvars) | map(attribute='inventory_hostname') | list }}"
FOUR = ["spark-a", "spark-b", "spark-c", "spark-d"]


@pytest.mark.parametrize("engines, grouping, members", [
    (["spark-a", "spark-b"], None, None),                       # the role's default: none declared
    (["spark-a", "spark-b"], [["spark-a"], ["spark-b"]], None),  # replicas, declared
    (["spark-a", "spark-b"], [["spark-a", "spark-b"]], None),    # split, declared
    (FOUR, [["spark-a", "spark-b"], ["spark-c", "spark-d"]], ["spark-a", "spark-c"]),
    (FOUR, [["spark-a"], ["spark-b"], ["spark-c", "spark-d"]], ["spark-a", "spark-b", "spark-c"]),
])
def test_the_proxys_members_are_each_groups_api_host(engines, grouping, members):
    variables = dict(ROLE, groups={"gb10": engines}, site_engine_group="gb10",
                     hostvars={host: {"inventory_hostname": host} for host in engines})
    if grouping is not None:
        variables["site_engine_groups"] = grouping
    tpl = with_filters(Templar(loader=DataLoader(), variables=variables))
    new = tpl.template(trust_as_template("{{ nginx_proxy_backends }}"))
    # the two topologies: what the proxy had before groups, every engine host
    assert new == (members if members is not None else tpl.template(trust_as_template(OLD_BACKENDS)))
    assert members is not None or new == engines
