# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the keepalived role's preflight notes of a host for the group's decision (``_keepalived_input``'s
``info_args``, ``listen_args``, ``settings``), read as its Jinja read it before."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _keepalived_input as ki

VARIABLES = {"keepalived_virtual_ipaddress": "10.89.7.100/24", "keepalived_interface": "eth0",
             "keepalived_virtual_router_id": 51, "keepalived_priority": " 250\n", "keepalived_advert_int": 1,
             "keepalived_unicast_src_ip": "", "keepalived_unicast_peer": [], "keepalived_nopreempt": "yes",
             "keepalived_preempt_delay": 5, "keepalived_track_engines": "false",
             "keepalived_engines_script_weight": 50, "keepalived_preflight_listen": 3,
             "_keepalived_state_file": "/run/factory-floor/keepalived.json"}


def test_info_args():
    assert ki.info_args(VARIABLES) == {"interface": "eth0", "virtual_ipaddress": "10.89.7.100/24",
                                       "state_file": "/run/factory-floor/keepalived.json"}


@pytest.mark.parametrize("listen, observed, expected", [
    (3, {"interface_exists": True}, {"interface": "eth0", "seconds": 3}),
    ("0.5", {"interface_exists": True}, {"interface": "eth0", "seconds": "0.5"}),
    (0, {"interface_exists": True}, None),
    ("", {"interface_exists": True}, None),
    (3, {"interface_exists": False}, None),
    (3, None, None),
])
def test_listen_args(listen, observed, expected):
    assert ki.listen_args(dict(VARIABLES, keepalived_preflight_listen=listen), observed) == expected


def test_settings_read_as_the_jinja_read_them():
    noted = ki.settings(VARIABLES, {"interface_exists": True}, {"routers": [{"virtual_router_id": 7}]})
    assert noted == {"virtual_ipaddress": "10.89.7.100/24", "interface": "eth0", "virtual_router_id": 51,
                     "priority": "250", "advert_int": 1, "unicast_src_ip": "", "unicast_peer": [], "nopreempt": True,
                     "preempt_delay": 5, "track_engines": False, "engines_weight": 50,
                     "observed": {"interface_exists": True}, "routers": [{"virtual_router_id": 7}]}
    assert ki.settings(VARIABLES, {"interface_exists": False})["routers"] is None
    assert [key for key, _variable in ki.SETTINGS_VARIABLES] == list(noted)[:11]
