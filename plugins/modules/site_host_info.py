#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: site_host_info
short_description: What the site check reads on one host - time synchronisation, units, the ports the collection uses
version_added: 0.1.0
description:
  - "Reads, and judges nothing (the C(factory_floor.llm.site_check_report) filter does, on the controller): whether the
    clock is synchronised (C(timedatectl show): C(NTPSynchronized), C(NTP)) and which time service runs
    (C(systemd-timesyncd), C(chrony)); whether the host is a container (C(systemd-detect-virt --container)); the
    C(LoadState) and C(ActiveState) of O(units); and for each of O(ports) whether it is free, or who listens on it
    (C(ss -Hltnp)) and whether one of its owner units is active then (the collection's own unit holding it)."
  - Changes nothing.
author:
  - Factory Floor maintainers (@factory-floor)
extends_documentation_fragment:
  - factory_floor.llm.attributes
  - factory_floor.llm.attributes.READ_ONLY
options:
  units:
    description: Units whose state is read (C(docker.service)); with O(engine) and O(proxy) given, C(docker.service) on an
      engine host, none elsewhere.
    type: list
    elements: str
  ports:
    description:
      - TCP ports the collection uses on this host, each C({port, purpose, variable, owner_units}) - the port, what uses
        it, the variable that sets it, and the units of the collection that may hold it (a port held while one of them
        is active is theirs).
      - With O(engine) and O(proxy) given instead, the collection's own - on an engine host O(vllm_port) (held by one of
        O(engine_units)) and O(watchdog_status_port) (by one of O(watchdog_units)), on a proxy host O(proxy_port) (by
        C(nginx.service)).
    type: list
    elements: dict
  engine:
    description: Whether this host is an engine host (of the inventory's engine group); given with O(proxy).
    type: bool
  proxy:
    description: Whether this host is a proxy host (of the inventory's proxy group); given with O(engine).
    type: bool
  vllm_port:
    description: vLLM's API port (C(vllm_port)), read on an engine host.
    type: int
  watchdog_status_port:
    description: The watchdog's state port (C(vllm_watchdog_status_port)), read on an engine host.
    type: int
  engine_units:
    description: The engine units (each topology's) that may hold O(vllm_port).
    type: list
    elements: str
    default: []
  watchdog_units:
    description: The watchdog units (each topology's) that may hold O(watchdog_status_port).
    type: list
    elements: str
    default: []
  proxy_port:
    description: The proxy's port (C(site_proxy_port)), read on a proxy host.
    type: int
"""

EXAMPLES = r"""
- name: Read what the site check needs here
  factory_floor.llm.site_host_info:
    units: [docker.service]
    ports:
      - {port: 8000, purpose: "vLLM's API", variable: vllm_port, owner_units: [vllm-replica.service, vllm-split.service]}
  register: seen

- name: Read docker and the collection's own ports on an engine host that is no proxy host
  factory_floor.llm.site_host_info:
    engine: true
    proxy: false
    vllm_port: 8000
    watchdog_status_port: 8011
    engine_units: [vllm-replica.service, vllm-split.service]
    watchdog_units: [vllm-watchdog.service, vllm-split-watchdog.service]
  register: seen
"""

RETURN = r"""
time:
  description: C(ntp_synchronized) (bool, null when unknown), C(ntp) (time sync enabled), C(services) (the time services active), C(error).
  returned: always
  type: dict
  sample: {ntp_synchronized: true, ntp: true, services: [systemd-timesyncd.service], error: ""}
virtualization:
  description: C(systemd-detect-virt --container)'s answer (V(none) on a machine).
  returned: always
  type: str
  sample: none
units:
  description: Per unit of O(units), C(load_state) and C(active_state).
  returned: always
  type: dict
  sample: {docker.service: {load_state: loaded, active_state: active}}
ports:
  description: Per O(ports) item, C(port), C(free), C(ours), C(holders) (C(process), C(pid)), C(purpose), C(variable), C(owner_units).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.factory_floor.llm.plugins.module_utils import _link_check as lc
from ansible_collections.factory_floor.llm.plugins.module_utils import _site_check as sc
from ansible_collections.factory_floor.llm.plugins.module_utils._host.systemd import parse_properties

TIME_UNITS = ("systemd-timesyncd.service", "chrony.service", "chronyd.service")


def unit_states(module, units):
    states = {}
    for unit in units:
        rc, out, _err = module.run_command(["systemctl", "show", "-p", "LoadState,ActiveState", "--", unit])
        props = parse_properties(out or "") if rc == 0 else {}
        states[unit] = {"load_state": props.get("LoadState", ""), "active_state": props.get("ActiveState", "")}
    return states


def time_state(module):
    rc, out, err = module.run_command(["timedatectl", "show", "-p", "NTPSynchronized", "-p", "NTP"])
    props = parse_properties(out or "") if rc == 0 else {}
    sync = props.get("NTPSynchronized")
    active = [unit for unit, state in unit_states(module, TIME_UNITS).items() if state["active_state"] == "active"]
    return {"ntp_synchronized": None if sync is None else sync == "yes",
            "ntp": None if props.get("NTP") is None else props.get("NTP") == "yes",
            "services": active, "error": "" if rc == 0 else (err or out or "timedatectl failed").strip()[:300]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            units=dict(type="list", elements="str"),
            ports=dict(type="list", elements="dict"),
            engine=dict(type="bool"),
            proxy=dict(type="bool"),
            vllm_port=dict(type="int"),
            watchdog_status_port=dict(type="int"),
            engine_units=dict(type="list", elements="str", default=[]),
            watchdog_units=dict(type="list", elements="str", default=[]),
            proxy_port=dict(type="int"),
        ),
        required_together=[("engine", "proxy")],
        mutually_exclusive=[("engine", "ports"), ("engine", "units")],
        required_if=[("engine", True, ("vllm_port", "watchdog_status_port")), ("proxy", True, ("proxy_port",))],
        supports_check_mode=True,
    )
    params = module.params
    if params["engine"] is not None:
        params["units"] = ["docker.service"] if params["engine"] else []
        params["ports"] = sc.collection_ports(params["engine"], params["proxy"], params["vllm_port"],
                                              params["watchdog_status_port"], params["engine_units"],
                                              params["watchdog_units"], params["proxy_port"])
    rc, out, _err = module.run_command(["systemd-detect-virt", "--container"])
    virtualization = (out or "").strip() or "none"
    units = unit_states(module, module.params["units"] or [])
    rc, out, _err = module.run_command(["ss", "-Hltnp"])
    listeners = lc.parse_ss_listeners(out) if rc == 0 else []
    ports = []
    for item in module.params["ports"] or []:
        port = int(item.get("port"))
        owners = [str(u) for u in item.get("owner_units") or []]
        holders = [h for h in listeners if h["port"] == port]
        active = any(s["active_state"] in ("active", "activating", "reloading")
                     for s in unit_states(module, owners).values()) if holders and owners else False
        ports.append({"port": port, "free": not holders, "ours": bool(holders) and active, "holders": holders,
                      "purpose": str(item.get("purpose") or ""), "variable": str(item.get("variable") or ""),
                      "owner_units": owners})
    module.exit_json(changed=False, time=time_state(module), virtualization=virtualization, units=units, ports=ports)


if __name__ == "__main__":
    main()
