# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The engine roles' variables that moved from Jinja into filters (vllm, vllm_split, vllm_watchdog vars):
for representative inputs, the old expression rendered with Ansible's own templating equals the filter's value."""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.filter.systemd_verify_command import systemd_verify_command
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, _trusted, templar


def render(expression, **variables):
    """``expression`` (a role variable's value) as Ansible evaluates it, with the collection's filters by FQCN."""
    return templar(variables).template(trust_as_template(expression))


def both(old, new, **variables):
    """(old, new) rendered with the same variables."""
    return render(old, **variables), render(new, **variables)


OLD_UNIT_VALIDATE = """/bin/sh -c 'd=$(mktemp -d) && cp %s "$d/{{ unit }}" && systemd-analyze verify --man=no "$d/{{ unit }}"; r=$?; rm -rf "$d"; exit $r'"""


@pytest.mark.parametrize("unit", ["vllm-replica.service", "vllm-split.service", "factory-floor-engine-leave.service",
                                  "vllm-watchdog-split.service"])
def test_systemd_verify_command_as_before(unit):
    assert render("{{ unit | factory_floor.llm.systemd_verify_command }}", unit=unit) == render(OLD_UNIT_VALIDATE, unit=unit)


@pytest.mark.parametrize("unit", ["", "a'b.service", "../x.service", None])
def test_systemd_verify_command_refuses_what_is_no_unit_name(unit):
    with pytest.raises(Exception, match="systemd_verify_command expects a unit file name"):
        systemd_verify_command(unit)


# --- vllm_split: the link addresses (head and peer) ----------------------------------------------

OLD_HEAD_ADDRESS = """{{ hostvars[vllm_split_head]['vllm_link_address']
     | default((hostvars[vllm_split_head]['ansible_facts'] | default({}))
               .get(hostvars[vllm_split_head]['vllm_link_interface'] | default(vllm_link_interface), {})
               .get('ipv4', {}).get('address', ''), true) }}"""
OLD_PEER_ADDRESS = """{{ (hostvars[_vllm_split_peer]['vllm_link_address']
      | default((hostvars[_vllm_split_peer]['ansible_facts'] | default({}))
                .get(hostvars[_vllm_split_peer]['vllm_link_interface'] | default(vllm_link_interface), {})
                .get('ipv4', {}).get('address', ''), true))
     if _vllm_split_peer else '' }}"""
LINK_FACTS = {"enp1s0f1np1": {"ipv4": {"address": "10.10.0.1"}}, "eth9": {"ipv4": {"address": "10.9.0.1"}},
              "default_ipv4": {"address": "192.0.2.1"}}
LINK_HOSTVARS = {
    "set": {"vllm_link_address": "10.10.0.2", "ansible_facts": LINK_FACTS},
    "empty_set": {"vllm_link_address": "", "ansible_facts": LINK_FACTS},
    "null_set": {"vllm_link_address": None, "vllm_link_interface": "eth9", "ansible_facts": LINK_FACTS},
    "facts": {"ansible_facts": LINK_FACTS},
    "own_interface": {"vllm_link_interface": "eth9", "ansible_facts": LINK_FACTS},
    "other_interface": {"vllm_link_interface": "eth7", "ansible_facts": LINK_FACTS},
    "no_facts": {},
    "no_ipv4": {"ansible_facts": {"enp1s0f1np1": {"ipv6": []}}},
}


@pytest.mark.parametrize("interface", ["enp1s0f1np1", "", "eth7"])
@pytest.mark.parametrize("host", sorted(LINK_HOSTVARS))
def test_link_address_as_before(host, interface):
    variables = {"hostvars": LINK_HOSTVARS, "vllm_link_interface": interface}
    new_head = "{{ hostvars | factory_floor.llm.link_address(vllm_split_head, vllm_link_interface) }}"
    new_peer = "{{ hostvars | factory_floor.llm.link_address(_vllm_split_peer, vllm_link_interface) }}"
    old, new = both(OLD_HEAD_ADDRESS, new_head, vllm_split_head=host, **variables)
    assert old == new
    assert both(OLD_PEER_ADDRESS, new_peer, _vllm_split_peer=host, **variables) == (old, new)


@pytest.mark.parametrize("peer", ["", "not-in-the-inventory"])
def test_link_address_of_no_host_is_empty(peer):
    new = "{{ hostvars | factory_floor.llm.link_address(_vllm_split_peer, 'eth0') }}"
    assert both(OLD_PEER_ADDRESS, new, hostvars=LINK_HOSTVARS, _vllm_split_peer=peer, vllm_link_interface="eth0") == ("", "")


# --- vllm_split: the tightest GPU memory fraction -------------------------------------------------

OLD_GPU_MEMORY = """{{ _vllm_split_hosts | map('extract', hostvars) | selectattr('vllm_gpu_memory_utilization', 'defined')
     | map(attribute='vllm_gpu_memory_utilization') | reject('none') | map('float') | min
     | default(vllm_gpu_memory_utilization, true) }}"""


@pytest.mark.parametrize("hostvars", [
    {"a": {"vllm_gpu_memory_utilization": 0.8}, "b": {"vllm_gpu_memory_utilization": "0.75"}},
    {"a": {"vllm_gpu_memory_utilization": 0.8}, "b": {}},
    {"a": {}, "b": {}},
    {"a": {"vllm_gpu_memory_utilization": None}, "b": {"vllm_gpu_memory_utilization": None}},
    {"a": {"vllm_gpu_memory_utilization": 0}, "b": {"vllm_gpu_memory_utilization": 0.7}},
    {"a": {"vllm_gpu_memory_utilization": "lots"}, "b": {"vllm_gpu_memory_utilization": 0.7}},
], ids=["both", "one", "none", "nulls", "zero", "no-number"])
@pytest.mark.parametrize("fallback", [0.85, "0.9"])
def test_tightest_gpu_memory_utilization_as_before(hostvars, fallback):
    new = "{{ hostvars | factory_floor.llm.tightest_gpu_memory_utilization(_vllm_split_hosts, vllm_gpu_memory_utilization) }}"
    old, got = both(OLD_GPU_MEMORY, new, hostvars=hostvars, _vllm_split_hosts=["a", "b"], vllm_gpu_memory_utilization=fallback)
    assert got == old and type(got) is type(old)


# --- vllm_split: the link check's ports -----------------------------------------------------------

OLD_LINK_PORTS = """{{ [{'port': vllm_split_master_port | int, 'variable': 'vllm_split_master_port',
       'purpose': "the split's rendezvous (--master-port) on the head"},
      {'port': vllm_split_link_collective_port | int, 'variable': 'vllm_split_link_collective_port',
       'purpose': "the link check's all-reduce"}] if _vllm_split_is_head else [] }}"""


@pytest.mark.parametrize("is_head", [True, False])
@pytest.mark.parametrize("ports", [(29501, 29502), ("29501", "29600"), ("port", "29600.0")])
def test_split_link_ports_as_before(is_head, ports):
    new = "{{ vllm_split_master_port | factory_floor.llm.split_link_ports(vllm_split_link_collective_port, _vllm_split_is_head) }}"
    old, got = both(OLD_LINK_PORTS, new, vllm_split_master_port=ports[0], vllm_split_link_collective_port=ports[1],
                    _vllm_split_is_head=is_head)
    assert got == old


# --- vllm_split: a rank's container options and environment ---------------------------------------

OLD_SPLIT = {
    "_vllm_split_hca": "{{ vllm_split_link.hca | default([]) if vllm_split_rdma != 'disabled' else [] }}",
    "_vllm_split_nccl_host": "{{ vllm_split_link.nccl_library | default('') }}",
    "_vllm_split_nccl_target": """{{ (vllm_cli.nccl_library | default('', true) or _vllm_split_nccl_host)
     if vllm_runtime == 'container' else _vllm_split_nccl_host }}""",
    "_vllm_split_run_args": r"""{{ (((vllm_split_link.device_nodes | default([]) | map('regex_replace', '^(.*)$', '--device=\1') | list)
       + ['--cap-add=IPC_LOCK']
       + ([] if vllm_container_run_args | select('match', '--ulimit[= ]memlock') | list else ['--ulimit=memlock=-1'])
       if _vllm_split_hca | length > 0 else [])
      + (['--volume=' ~ _vllm_split_nccl_host ~ ':' ~ _vllm_split_nccl_target ~ ':ro'] if _vllm_split_nccl_host | length > 0 else []))
     if vllm_runtime == 'container' else [] }}""",
    "_vllm_split_env": """{{ {'VLLM_HOST_IP': vllm_link_address, 'GLOO_SOCKET_IFNAME': vllm_link_interface, 'NCCL_SOCKET_IFNAME': vllm_link_interface}
     | combine({'NCCL_IB_HCA': _vllm_split_hca | join(',')} if _vllm_split_hca | length > 0 else {})
     | combine({'NCCL_IB_DISABLE': '1'} if vllm_split_rdma == 'disabled' else {})
     | combine({'NCCL_DEBUG': vllm_split_nccl_debug, 'NCCL_DEBUG_SUBSYS': 'INIT,NET'} if vllm_split_nccl_debug | length > 0 else {})
     | combine({'VLLM_NCCL_SO_PATH': _vllm_split_nccl_target} if _vllm_split_nccl_host | length > 0 else {})
     | combine({'LD_PRELOAD': _vllm_split_nccl_host} if vllm_runtime == 'venv' and _vllm_split_nccl_host | length > 0 else {}) }}""",
    "_vllm_split_collective_env": """{{ (vllm_env | combine(vllm_env_host)) | dict2items | selectattr('key', 'match', '(NCCL|GLOO|UCX)_') | items2dict
     | combine(_vllm_split_env | dict2items | rejectattr('key', 'equalto', 'VLLM_HOST_IP') | items2dict)
     | combine({'NCCL_DEBUG': 'INFO', 'NCCL_DEBUG_SUBSYS': 'INIT,NET'}) }}""",
}
SPARK_LINK = {"hca": ["roceP2p1s0f1", "rocep1s0f1"], "nccl_library": "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
              "device_nodes": ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0"]}
LINKS = {"spark": SPARK_LINK, "tcp": {"hca": [], "nccl_library": "", "device_nodes": []},
         "no_nccl": dict(SPARK_LINK, nccl_library=""), "partial": {"hca": ["mlx5_0"]}, "empty": {}, "unset": None}
CASES = [
    ("container", "auto", "spark", {"nccl_library": "/opt/image/libnccl.so.2"}, [], "INFO", {}, {}),
    ("container", "auto", "spark", {}, ["--ulimit=memlock=-1:-1"], "", {"NCCL_P2P_LEVEL": "NVL"}, {}),
    ("container", "auto", "spark", {"nccl_library": ""}, ["--ulimit memlock=1"], "WARN", {}, {"UCX_TLS": "tcp"}),
    ("container", "disabled", "spark", None, [], "INFO", {"HF_TOKEN": "secret", "NCCL_DEBUG": "TRACE"},
     {"GLOO_SOCKET_IFNAME": "eth1"}),
    ("container", "auto", "tcp", None, [], "INFO", {}, {}),
    ("container", "required", "no_nccl", None, [], "INFO", {}, {}),
    ("container", "auto", "partial", None, [], "", {}, {}),
    ("container", "auto", "empty", None, [], "INFO", {}, {}),
    ("container", "auto", "unset", None, [], "INFO", {}, {}),
    ("venv", "auto", "spark", {"nccl_library": "/opt/image/libnccl.so.2"}, [], "INFO", {"NCCL_IB_TIMEOUT": "22"},
     {"NCCL_IB_TIMEOUT": "23", "OTHER": "x"}),
    ("venv", "disabled", "tcp", None, [], "", {}, {}),
    ("venv", "auto", "unset", None, [], "INFO", {}, {}),
]


@pytest.mark.parametrize("runtime,rdma,link,cli,run_args,debug,env,env_host", CASES)
def test_split_rank_settings_as_before(runtime, rdma, link, cli, run_args, debug, env, env_host):
    with open(os.path.join(ROOT, "roles", "vllm_split", "vars", "main.yml"), encoding="utf-8") as handle:
        new_vars = _trusted(yaml.safe_load(handle))
    variables = {"vllm_runtime": runtime, "vllm_split_rdma": rdma, "vllm_container_run_args": run_args,
                 "vllm_link_address": "10.10.0.1", "vllm_link_interface": "enp1s0f1np1",
                 "vllm_split_nccl_debug": debug, "vllm_env": env, "vllm_env_host": env_host}
    if LINKS[link] is not None:
        variables["vllm_split_link"] = LINKS[link]
    if cli is not None:
        variables["vllm_cli"] = cli
    old_values = templar(dict(variables, **{name: trust_as_template(text) for name, text in OLD_SPLIT.items()}))
    new_values = templar(dict(variables, **new_vars))
    for name in OLD_SPLIT:
        old = old_values.template(trust_as_template("{{ %s }}" % name))
        new = new_values.template(trust_as_template("{{ %s }}" % name))
        assert new == old, name
        if isinstance(old, dict):
            assert list(new) == list(old), name


# --- vllm_watchdog: role, peers, kill commands, container, WatchdogSec= ---------------------------

OLD_WATCHDOG = {
    "_vllm_watchdog_role": """{{ 'replica' if vllm_watchdog_topology == 'replicas'
     else ('head' if inventory_hostname == vllm_watchdog_split_head else 'worker') }}""",
    "_vllm_watchdog_peers": """{{ (_vllm_watchdog_split_hosts | reject('equalto', vllm_watchdog_split_head) | list)
     if inventory_hostname == vllm_watchdog_split_head else [vllm_watchdog_split_head] }}""",
    "_vllm_watchdog_kill_commands": r"""{{ ([[_vllm_container_engine_path, 'kill', '--signal', 'KILL',
        _vllm_watchdog_engine_unit | regex_replace('\.service$', '')]]
      if vllm_runtime == 'container' else [])
     + [['/usr/bin/systemctl', 'kill', '--signal=SIGKILL', _vllm_watchdog_engine_unit]] }}""",
    "_vllm_watchdog_container": r"""{{ {'engine': _vllm_container_engine_path, 'name': _vllm_watchdog_engine_unit | regex_replace('\.service$', '')}
     if vllm_runtime == 'container' else none }}""",
    "_vllm_watchdog_read_ranks": "{{ [1, _vllm_watchdog_peers | length] | max if vllm_watchdog_topology == 'split' else 1 }}",
    "_vllm_watchdog_self_bound": """{{ [300, 4 * ((vllm_watchdog_interval | float) + (vllm_watchdog_probe_timeout | float)
               + (3 + _vllm_watchdog_read_ranks | int) * (vllm_watchdog_request_timeout | float)
               + (vllm_watchdog_pair_ack_timeout | float))] | max | int }}""",
}
WATCHDOG_CASES = [
    # topology, host, head, group, runtime, engine, (interval, probe, request, ack)
    ("replicas", "spark-a", "spark-a", ["spark-a", "spark-b"], "container", "/usr/bin/docker", (5, 15, 5, 60)),
    ("replicas", "spark-b", "", [], "venv", "/usr/bin/docker", (5, 15, 5, 60)),
    ("split", "spark-a", "spark-a", ["spark-a", "spark-b"], "container", "/usr/bin/podman", (5, 15, 5, 60)),
    ("split", "spark-b", "spark-a", ["spark-a", "spark-b"], "container", "/usr/bin/docker", (5, 15, 5, 60)),
    ("split", "s1", "s1", ["s1", "s2", "s3", "s4"], "venv", "/usr/bin/docker", (30, 60, 20, 120)),
    ("split", "s3", "s1", ["s1", "s2", "s3", "s4"], "venv", "/usr/bin/docker", ("2.5", "10", "7.5", "45")),
    ("split", "s1", "s1", ["s1"], "container", "/usr/bin/docker", (60, 60, 30, 300)),
]


@pytest.mark.parametrize("topology,host,head,group,runtime,engine,seconds", WATCHDOG_CASES)
def test_watchdog_settings_as_before(topology, host, head, group, runtime, engine, seconds):
    with open(os.path.join(ROOT, "roles", "vllm_watchdog", "vars", "main.yml"), encoding="utf-8") as handle:
        new_vars = _trusted(yaml.safe_load(handle))
    unit = "vllm-split.service" if topology == "split" else "vllm-replica.service"
    variables = {"vllm_watchdog_topology": topology, "inventory_hostname": host, "vllm_watchdog_split_head": head,
                 "_vllm_watchdog_split_hosts": group, "vllm_runtime": runtime, "_vllm_container_engine_path": engine,
                 "_vllm_watchdog_engine_unit": unit, "vllm_watchdog_interval": seconds[0],
                 "vllm_watchdog_probe_timeout": seconds[1], "vllm_watchdog_request_timeout": seconds[2],
                 "vllm_watchdog_pair_ack_timeout": seconds[3]}
    new_vars.update(variables)
    old_values = templar(dict(variables, **{name: trust_as_template(text) for name, text in OLD_WATCHDOG.items()}))
    new_values = templar(new_vars)
    for name in OLD_WATCHDOG:
        if name == "_vllm_watchdog_read_ranks":
            continue
        old = old_values.template(trust_as_template("{{ %s }}" % name))
        new = new_values.template(trust_as_template("{{ %s }}" % name))
        assert new == old and type(new) is type(old), name


# --- vllm: the API's clients, the probe URL, the container's resources, Prometheus, the topologies --

OLD_VLLM = {
    "_vllm_api_clients": """{{ (groups[site_proxy_group] | default([]) | map('extract', hostvars)
      | map(attribute='ansible_facts') | map(attribute='default_ipv4', default={})
      | map(attribute='address', default='') | select | list)
     + vllm_allowed_clients }}""",
    "_vllm_probe_url": """{{ {'vllm_probe_host': vllm_probe_host, 'vllm_listen_host': vllm_listen_host, 'vllm_port': vllm_port}
     | factory_floor.llm.vllm_probe_url }}""",
    "_vllm_container_resource_args": """{{ ((['--device=' ~ vllm_container_gpus] if vllm_container_engine == 'podman' else ['--gpus=' ~ vllm_container_gpus])
      if vllm_container_gpus | length > 0 else [])
     + (['--ipc=' ~ vllm_container_ipc] if vllm_container_ipc | length > 0 else [])
     + (['--shm-size=' ~ vllm_container_shm_size] if vllm_container_shm_size | length > 0 else []) }}""",
    "_vllm_prometheus_serves": """{{ vllm_topology_record_topology | default('') == 'replicas'
     or inventory_hostname == (vllm_split_head | default((groups[vllm_split_group | default(site_engine_group)]
                                                          | default([inventory_hostname])) | first)) }}""",
    "_vllm_prometheus_targets": """{{ [{'targets': [vllm_prometheus_address ~ ':' ~ vllm_port],
       'labels': {'host': inventory_hostname, 'topology': vllm_topology_record_topology | default('')}}]
     if _vllm_prometheus_serves | bool else [] }}""",
    "_vllm_topologies": """{{ _site_topologies | combine({'replicas': {'role': 'vllm_replica', 'model': vllm_model},
                                 'split': {'role': 'vllm_split', 'model': vllm_split_model | default(vllm_model)}},
                                recursive=True) }}""",
}
PROXY_HOSTVARS = {
    "gw": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.10"}}},
    "gw-no-address": {"ansible_facts": {"default_ipv4": {}}},
    "gw-no-ipv4": {"ansible_facts": {}},
    "gw-2": {"ansible_facts": {"default_ipv4": {"address": "10.0.0.11"}}},
    "spark-a": {}, "spark-b": {},
}
VLLM_CASES = [
    # groups, extra variables
    ({"proxy": ["gw"], "gb10": ["spark-a", "spark-b"]}, {}),
    ({"proxy": ["gw", "gw-no-address", "gw-no-ipv4", "gw-2"], "gb10": ["spark-a", "spark-b"]},
     {"vllm_allowed_clients": ["192.0.2.0/24"], "vllm_container_engine": "podman", "vllm_container_shm_size": "16g",
      "vllm_topology_record_topology": "replicas", "vllm_probe_host": "10.0.1.5", "vllm_model": "/models/a"}),
    ({"gb10": ["spark-a", "spark-b"]},
     {"vllm_container_gpus": "", "vllm_container_ipc": "", "vllm_topology_record_topology": "split",
      "vllm_split_model": "/models/b", "vllm_listen_host": "10.0.0.5", "vllm_port": 8002}),
    ({"gb10": ["spark-b", "spark-a"]}, {"vllm_topology_record_topology": "split", "vllm_split_head": "spark-b"}),
    ({"gb10": ["spark-b", "spark-a"]}, {"vllm_topology_record_topology": "split"}),
    ({"gb10": ["spark-a", "spark-b"]}, {"vllm_topology_record_topology": "split", "vllm_split_head": "spark-a"}),
    ({"gb10": ["spark-a"], "pair": ["spark-b"]}, {"vllm_topology_record_topology": "split", "vllm_split_group": "pair"}),
    ({"gb10": ["spark-a"]}, {"vllm_topology_record_topology": "split", "vllm_split_group": "absent"}),
]


@pytest.mark.parametrize("groups,extra", VLLM_CASES)
def test_vllm_vars_as_before(groups, extra):
    new_vars = {}
    for where in ("site/defaults", "site/vars", "vllm/defaults", "vllm/vars"):
        with open(os.path.join(ROOT, "roles", where, "main.yml"), encoding="utf-8") as handle:
            new_vars.update(_trusted(yaml.safe_load(handle)))
    variables = dict(new_vars, inventory_hostname="spark-a", hostvars=PROXY_HOSTVARS, groups=groups,
                     vllm_prometheus_address="10.0.0.1", **extra)
    old_values = templar(dict(variables, **{name: trust_as_template(text) for name, text in OLD_VLLM.items()}))
    new_values = templar(variables)
    for name in OLD_VLLM:
        if name == "_vllm_prometheus_serves":
            continue
        old = old_values.template(trust_as_template("{{ %s }}" % name))
        new = new_values.template(trust_as_template("{{ %s }}" % name))
        assert new == old, name


# --- vllm defaults and tasks, vllm_watchdog's status ----------------------------------------------

OLD_LINK_ADDRESS_DEFAULT = """{{ ansible_facts[vllm_link_interface]['ipv4']['address']
     if vllm_link_interface and vllm_link_interface in ansible_facts
     else ansible_facts['default_ipv4']['address'] | default('') }}"""


def _defaults(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return _trusted(yaml.safe_load(handle))


@pytest.mark.parametrize("facts,interface", [
    ({"enp1": {"ipv4": {"address": "10.10.0.1"}}, "default_ipv4": {"address": "192.0.2.1"}}, "enp1"),
    ({"enp1": {"ipv4": {"address": "10.10.0.1"}}, "default_ipv4": {"address": "192.0.2.1"}}, ""),
    ({"default_ipv4": {"address": "192.0.2.1"}}, "enp9"),
    ({"default_ipv4": {}}, ""),
    ({}, ""),
    ({}, "enp1"),
])
def test_link_interface_address_as_before(facts, interface):
    new = _defaults("vllm")["vllm_link_address"]
    old, got = both(OLD_LINK_ADDRESS_DEFAULT, new, ansible_facts=facts, vllm_link_interface=interface)
    assert got == old


def test_link_interface_address_fails_as_before_on_an_interface_without_ipv4():
    facts = {"enp1": {"ipv6": []}}
    for expression in (OLD_LINK_ADDRESS_DEFAULT, _defaults("vllm")["vllm_link_address"]):
        with pytest.raises(Exception):
            render(expression, ansible_facts=facts, vllm_link_interface="enp1")


def _task_value(role, tasks_file, task_name, *keys):
    with open(os.path.join(ROOT, "roles", role, "tasks", tasks_file), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    pending = list(tasks)
    while pending:
        task = pending.pop(0)
        pending.extend(task.get("block") or [])
        if task.get("name") == task_name:
            value = task
            for key in keys:
                value = value[key]
            return _trusted(value)
    raise AssertionError("no task %r in %s" % (task_name, tasks_file))


OLD_IMAGE_CHECK = """{{ {'image': __vllm_image_info.image,
              'running': dict((_vllm_units.replicas + _vllm_units.split)
                              | zip(_vllm_container_names | map('extract', __vllm_image_info.containers)))}
             if vllm_runtime == 'container' else {} }}"""
IMAGE_INFO = {"image": {"id": "sha256:" + "1" * 64, "present": True},
              "containers": {"vllm-replica": {"exists": True, "image_id": "sha256:" + "1" * 64},
                             "vllm-split": {"exists": False}}}


@pytest.mark.parametrize("runtime,info", [("container", IMAGE_INFO), ("venv", {"skipped": True, "changed": False})])
def test_engine_images_as_before(runtime, info):
    new = _task_value("vllm", "image_check.yml", "Note the image and what the engines' containers run",
                      "ansible.builtin.set_fact", "vllm_image_check")
    variables = {"__vllm_image_info": info, "vllm_runtime": runtime,
                 "_vllm_units": {"replicas": ["vllm-replica.service"], "split": ["vllm-split.service"]},
                 "_vllm_container_names": ["vllm-replica", "vllm-split"]}
    old, got = both(OLD_IMAGE_CHECK, new, **variables)
    assert got == old


OLD_MODEL_HOSTS = """{{ dict(__vllm_model_hosts | zip(__vllm_model_hosts | map('extract', hostvars)
                                       | map(attribute='__vllm_model_manifest', default={}))) }}"""


def test_host_values_as_before():
    new_vars = _task_value("vllm", "model_check.yml",
                           "Refuse copies of the model that differ between the engine hosts, naming the files and the hosts",
                           "vars")
    hostvars = {"spark-a": {"__vllm_model_manifest": {"path": "/models/m", "files": {"a": 1}}},
                "spark-b": {}, "spark-c": {"__vllm_model_manifest": {"path": "/models/m", "files": {"a": 2}}}}
    variables = {"hostvars": hostvars, "__vllm_model_hosts": ["spark-b", "spark-a", "spark-c"]}
    assert render(new_vars["__vllm_model_manifests"], **variables) == render(OLD_MODEL_HOSTS, **variables)


OLD_RECORD = """{{ {'topology': vllm_topology_record_topology,
              'since': vllm_topology_record_since | float,
              'by': vllm_topology_record_by | default(''),
              'playbook': vllm_topology_record_playbook,
              'run': vllm_topology_record_run | default(''),
              'note': vllm_topology_record_note | default(''),
              'model': vllm_topology_record_model | default('')} | to_json }}"""


@pytest.mark.parametrize("variables", [
    {"vllm_topology_record_topology": "split", "vllm_topology_record_since": "1765000000.5",
     "vllm_topology_record_playbook": "switch_to_split.yml"},
    {"vllm_topology_record_topology": "replicas", "vllm_topology_record_since": 1765000000,
     "vllm_topology_record_playbook": "deploy.yml", "vllm_topology_record_by": "ops", "vllm_topology_record_run": "r1",
     "vllm_topology_record_note": "a note: with \"quotes\"", "vllm_topology_record_model": "/models/m"},
])
def test_topology_record_content_as_before(variables):
    # The content is topology_record_write's now (plugins/module_utils/_topology_record_write.py), the same bytes.
    from ansible.plugins.filter.core import to_json

    from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_record_write as trw

    prefix = "vllm_topology_record_"
    values = {name[len(prefix):]: value for name, value in variables.items()}
    assert to_json(trw.content(values)) == render(OLD_RECORD, **variables)


OLD_STATUS = """{{ dict(__vllm_watchdog_status_files.results | map(attribute='item')
                | zip(__vllm_watchdog_status_files.results | map(attribute='content', default='') | map('b64decode'))) }}"""


def test_slurp_contents_as_before():
    new = _task_value("vllm_watchdog", "status.yml", "Note what the watchdogs say", "ansible.builtin.set_fact",
                      "vllm_watchdog_status", "status")
    results = [{"item": "vllm-watchdog-replica.service", "content": "eyJ2ZXJkaWN0IjogIm9rIn0=", "encoding": "base64"},
               {"item": "vllm-watchdog-split.service", "failed": True, "msg": "file not found"},
               {"item": "x.service", "content": "w6lsw6h2ZQo="}]
    variables = {"__vllm_watchdog_status_files": {"results": results}}
    old, got = both(OLD_STATUS, new, **variables)
    assert got == old
