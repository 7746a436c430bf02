# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The site role's API keys and limit look, and site_deploy's API engines, now filters (first_engine_value,
site_limit_gathered, api_engines): each renders exactly what the Jinja it replaced rendered (kept here as it stood
in the roles), through Ansible's own templar over the roles' variables and an inventory."""

from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.filter.api_engines import api_engines
from ansible_collections.factory_floor.llm.plugins.filter.first_engine_value import first_engine_value
from ansible_collections.factory_floor.llm.plugins.filter.site_limit_gathered import site_limit_gathered
from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import role_variables

OLD = {
    "site_api_key": """\
{{ hostvars[groups[site_engine_group][0]]['vllm_api_key'] | default('')
   if groups[site_engine_group] | default([]) | length > 0 else '' }}""",
    "site_api_key_next": """\
{{ hostvars[groups[site_engine_group][0]]['vllm_api_key_next'] | default('')
   if groups[site_engine_group] | default([]) | length > 0 else '' }}""",
    # tasks/limit.yml's gathered, without __site_limit_refuse_unknown (the first look).
    "_site_limit_gathered": """\
{{ (site_limit_gathered | default(false) | bool) and not (site_limit_gather | default(false) | bool) }}""",
    "_site_deploy_api_engines": """\
{{ groups[site_engine_group] if _vllm_topologies[topology].api == 'all'
   else [hostvars[groups[site_engine_group][0]]['vllm_split_head'] | default(groups[site_engine_group][0])] }}""",
}

ROLE = dict(role_variables("site_deploy"), _vllm_topologies={"replicas": {"api": "all"}, "split": {"api": "head"}})
HOSTVARS = {
    "spark-a": {"vllm_api_key": "sk-a", "vllm_api_key_next": "sk-next", "vllm_split_head": "spark-b"},
    "spark-b": {"vllm_api_key": "sk-b"},
    "bare": {},
    "nulls": {"vllm_api_key": None, "vllm_api_key_next": "", "vllm_split_head": None},
}

INVENTORIES = [
    dict(groups={"gb10": ["spark-a", "spark-b"]}),
    dict(groups={"gb10": ["spark-b", "spark-a"]}),
    dict(groups={"gb10": ["bare", "spark-a"]}),
    dict(groups={"gb10": ["nulls"]}),
    dict(groups={"gb10": []}),
    dict(groups={"sparks": ["spark-a"]}, site_engine_group="sparks"),
]
TOPOLOGIES = ["replicas", "split"]
LIMITS = [{}, {"site_limit_gathered": True}, {"site_limit_gathered": "yes", "site_limit_gather": "no"},
          {"site_limit_gathered": True, "site_limit_gather": True}, {"site_limit_gather": 1},
          {"site_limit_gathered": "True", "site_limit_gather": 0}, {"site_limit_gathered": False}]


def templar(**inventory):
    variables = dict(ROLE, hostvars=HOSTVARS)
    variables.update(inventory)
    return with_filters(Templar(loader=DataLoader(), variables=variables))


def same(tpl, name):
    old = tpl.template(trust_as_template(OLD[name]))
    new = tpl.template(trust_as_template("{{ %s }}" % name))
    assert new == old and type(new) is type(old)


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("name", ["site_api_key", "site_api_key_next"])
def test_the_keys_are_what_the_old_jinja_rendered(name, inventory):
    same(templar(**inventory), name)


@pytest.mark.parametrize("inventory", INVENTORIES[:4] + INVENTORIES[5:])
@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_the_api_engines_are_what_the_old_jinja_rendered(inventory, topology):
    same(templar(topology=topology, **inventory), "_site_deploy_api_engines")


def test_the_replicas_api_engines_do_not_need_hostvars():
    tpl = with_filters(Templar(loader=DataLoader(), variables=dict(ROLE, topology="replicas", groups={"gb10": ["a"]})))
    assert tpl.template(trust_as_template("{{ _site_deploy_api_engines }}")) == tpl.template(
        trust_as_template(OLD["_site_deploy_api_engines"])) == ["a"]


@pytest.mark.parametrize("limit", LIMITS)
def test_the_limit_look_is_what_the_old_jinja_rendered(limit):
    same(templar(**limit), "_site_limit_gathered")


@pytest.mark.parametrize("name", ["site_api_key", "site_api_key_next"])
def test_without_groups_nor_hostvars_the_keys_are_empty_as_before(name):
    """A bare templating (a role test rendering a template) has neither: the old Jinja never read hostvars then."""
    tpl = with_filters(Templar(loader=DataLoader(), variables=dict(ROLE)))
    assert tpl.template(trust_as_template(OLD[name])) == tpl.template(trust_as_template("{{ %s }}" % name)) == ""


def test_the_tasks_own_override_still_wins():
    tpl = templar(__site_limit_refuse_unknown=True)
    assert tpl.template(trust_as_template("{{ __site_limit_refuse_unknown | default(_site_limit_gathered) }}")) is True


def test_the_filters_alone():
    assert first_engine_value([], HOSTVARS, "vllm_api_key") == ""
    assert first_engine_value(["bare"], HOSTVARS, "vllm_api_key") == ""
    assert first_engine_value(["nulls"], HOSTVARS, "vllm_api_key") is None
    assert api_engines(["spark-a", "spark-b"], "head", HOSTVARS) == ["spark-b"]
    assert api_engines(["bare", "spark-a"], "head", HOSTVARS) == ["bare"]
    assert api_engines(["spark-a", "spark-b"], "all", HOSTVARS) == ["spark-a", "spark-b"]
    assert site_limit_gathered("yes", "off") is True and site_limit_gathered(True, True) is False


@pytest.mark.parametrize("inventory", [
    {}, {"vllm_listen_host": "10.0.0.5"}, {"vllm_listen_host": "fd00::5", "vllm_port": 8001},
    {"vllm_listen_host": "10.0.0.5", "vllm_probe_host": "10.0.1.5"}, {"site_engine_port": 9000},
    {"vllm_listen_host": "", "vllm_port": "8002"}, {"vllm_listen_host": "::"},
])
def test_the_endpoint_url_is_what_the_old_jinja_rendered(inventory):
    old = """{{ {'vllm_probe_host': vllm_probe_host | default(''), 'vllm_listen_host': vllm_listen_host | default('0.0.0.0'),
    'vllm_port': vllm_port | default(site_engine_port)} | factory_floor.llm.vllm_probe_url }}"""
    tpl = templar(**inventory)
    assert tpl.template(trust_as_template(old)) == tpl.template(trust_as_template("{{ _site_vllm_endpoint.url }}"))
