# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The keepalived role's watch configuration (a mapping in vars/main.yml now) and the watch unit's check
(systemd_verify_command): each renders exactly what the Jinja it replaced rendered (kept here as it stood in the
role), through Ansible's own templar over the role's variables and an inventory."""

from __future__ import annotations

import json

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.tests.unit.roles.collection_filters import with_filters
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import render, role_variables

OLD_CONFIG = """\
{{ {'virtual_ipaddress': __keepalived_address | default(keepalived_virtual_ipaddress),
    'interface': keepalived_interface,
    'state_file': _keepalived_state_file,
    'interval': keepalived_watch_interval | float} | to_nice_json }}"""
OLD_VALIDATE = """\
/bin/sh -c 'd=$(mktemp -d) && cp %s "$d/{{ _keepalived_watch_unit }}" \
&& systemd-analyze verify --man=no "$d/{{ _keepalived_watch_unit }}"; r=$?; rm -rf "$d"; exit $r'"""

ROLE = role_variables("keepalived")


@pytest.mark.parametrize("inventory", [
    {"keepalived_virtual_ipaddress": "10.0.0.100/24", "keepalived_interface": "eth0"},
    {"keepalived_virtual_ipaddress": "10.0.0.100/24", "keepalived_interface": "eth0", "__keepalived_address": "10.0.0.7"},
    {"keepalived_virtual_ipaddress": "", "keepalived_interface": "", "keepalived_watch_interval": "2.5"},
    {"keepalived_virtual_ipaddress": "fd00::100/64", "keepalived_interface": "br 0", "keepalived_watch_interval": 3},
    {"keepalived_virtual_ipaddress": "10.0.0.100", "keepalived_interface": "eth0", "keepalived_watch_interval": "soon",
     "_keepalived_watch_unit": "watch two.service"},
])
def test_the_watch_config_and_check_are_what_the_old_jinja_rendered(inventory):
    tpl = with_filters(Templar(loader=DataLoader(), variables=dict(ROLE, **inventory)))
    assert tpl.template(trust_as_template("{{ _keepalived_watch_settings | to_nice_json }}")) == tpl.template(
        trust_as_template(OLD_CONFIG))
    assert tpl.template(trust_as_template("{{ _keepalived_watch_unit_validate }}")) == tpl.template(
        trust_as_template(OLD_VALIDATE))


def test_the_watch_configuration_is_the_settings_as_json_byte_for_byte():
    # Written with the site role's daemon entry point (a template), the same bytes as the copy it replaced: a watch
    # running on the old file is not restarted for nothing.
    inventory = dict(keepalived_interface="eth0", keepalived_virtual_ipaddress="10.0.0.9/24")
    text = render("keepalived", "keepalived-watch.json.j2", **inventory)
    assert text == json.dumps(json.loads(text), indent=4, sort_keys=True)
    assert json.loads(text) == {"interface": "eth0", "interval": 5.0, "state_file": "/run/factory-floor/keepalived.json",
                                "virtual_ipaddress": "10.0.0.9/24"}
