# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What the split renders for a GB10 pair (inventory/example) and for the lab, with Ansible's own templating.

The container command and the environment of rank 0 come from the roles' defaults and vars,
the example inventory, and what the link check and the image check find on a DGX Spark
(the cabled port's two RoCE twins, DGX OS's libnccl, the image torch's NCCL): NCCL and Gloo
pinned to the link, NCCL on both RDMA twins with the device files, IPC_LOCK and no memlock
limit, the host's NCCL mounted over the image's and named in VLLM_NCCL_SO_PATH, the recipes'
settings. roles/vllm_split/README.md shows the same command: this test compares them.
"""

from __future__ import annotations

import os
import re
import shlex

import pytest
import yaml

from ansible.template import trust_as_template

from ansible_collections.factory_floor.llm.plugins.action.engine_plan import ARGUMENT_SPEC
from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep
from ansible_collections.factory_floor.llm.tests.unit.roles.role_templates import ROOT, _trusted, templar as role_templar

pytestmark = pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")

# On a DGX Spark: the cabled port's twins (ibdev2netdev "Up"), DGX OS's libnccl2, and the NCCL
# the image's torch loads (the image check's probe).
SPARK_LINK = {"hca": ["roceP2p1s0f1", "rocep1s0f1"], "nccl_library": "/usr/lib/aarch64-linux-gnu/libnccl.so.2",
              # For example; the link check lists whatever character devices /dev/infiniband holds.
              "device_nodes": ["/dev/infiniband/rdma_cm", "/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"]}
IMAGE_NCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def _host_vars(inventory, name):
    """The host's host_vars; a third or fourth Spark the example does not list gets its link address by number
    (spark-3: 10.10.10.3), as its host_vars would set it."""
    path = os.path.join(ROOT, "inventory", inventory, "host_vars", name + ".yml")
    if os.path.exists(path) or not name.startswith("spark-"):
        return _load("inventory", inventory, "host_vars", name + ".yml")
    return {"vllm_link_address": "10.10.10.%s" % name.split("-")[1]}


def _variables(inventory, host, hosts, link, cli, extra=None):
    values = {}
    for where in ("site/defaults", "site/vars", "vllm/defaults", "vllm/vars", "vllm_split/defaults", "vllm_split/vars"):
        values.update(_trusted(_load("roles", where, "main.yml")))
    group_vars = {}
    for name in ("all", "gb10"):
        group_vars.update(_load("inventory", inventory, "group_vars", name + ".yml"))
    hostvars = {}
    for name in hosts:
        hostvars[name] = dict(group_vars, **_host_vars(inventory, name), inventory_hostname=name)
    values.update(_trusted(group_vars))
    values.update(_trusted(extra or {}))
    values.update(_trusted(hostvars[host]))
    values.update(inventory_hostname=host, groups={"gb10": hosts, "proxy": hosts}, hostvars=hostvars, ansible_facts={},
                  vllm_split_link=link, vllm_cli=cli, vllm_service_name="vllm-split.service")
    # The service entry point's options, as vllm_split's main.yml passes them.
    values.update(vllm_service_settings=trust_as_template("{{ _vllm_split_settings }}"),
                  vllm_service_env=trust_as_template("{{ _vllm_split_env }}"),
                  vllm_service_run_args=trust_as_template("{{ _vllm_split_run_args }}"))
    return values


def plan_args(templar):
    """engine_plan's options as the vllm role's plan entry point leaves them to the action plugin: each read from the
    role's variable it names (``_engine_plan.ROLE_VARIABLES``), an undefined one left to the option's default."""
    def read(name):
        if name not in templar.available_variables:
            raise KeyError(name)
        return templar.template(trust_as_template("{{ %s }}" % name))
    return ep.role_args(read, {})


def render(inventory="example", host="spark-1", hosts=("spark-1", "spark-2"), link=None, cli=None, extra=None):
    """(argv, environment) of ``host``'s rank as plan.yml's engine_plan composes them from the role's variables
    (``extra``: group_vars on top of the inventory's)."""
    templar = role_templar(_variables(
        inventory, host, list(hosts), SPARK_LINK if link is None else link, {"nccl_library": IMAGE_NCCL} if cli is None else cli,
        extra))
    (task,) = [task for task in _load("roles", "vllm", "tasks", "plan.yml") if "factory_floor.llm.engine_plan" in task]
    assert task["factory_floor.llm.engine_plan"] == {}  # every option from the role's variables
    defaults = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    composed = ep.compose(dict(defaults, **plan_args(templar)), host)
    return [str(a) for a in composed["argv"]], {str(k): str(v) for k, v in composed["environment"].items()}


def test_a_gb10_pair_runs_nccl_pinned_to_the_link_on_both_rdma_twins_with_the_hosts_nccl():
    argv, env = render()
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert env["VLLM_HOST_IP"] == "10.10.10.1"
    assert env["NCCL_IB_HCA"] == "roceP2p1s0f1,rocep1s0f1"
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
    assert env["VLLM_NCCL_SO_PATH"] == IMAGE_NCCL and "NCCL_IB_DISABLE" not in env and "LD_PRELOAD" not in env
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert env["TRITON_CACHE_DIR"] == "/root/.cache/triton"
    for option in ("--gpus=all", "--ipc=host", "--device=/dev/infiniband/rdma_cm", "--device=/dev/infiniband/uverbs1",
                   "--cap-add=IPC_LOCK",
                   "--volume=/usr/lib/aarch64-linux-gnu/libnccl.so.2:%s:ro" % IMAGE_NCCL):
        assert option in argv, option
    # The inventory's own memlock option is not doubled.
    assert [a for a in argv if a.startswith("--ulimit")] == ["--ulimit=memlock=-1"]
    serve = argv[argv.index("serve") + 1:]
    pairs = dict(zip(serve[1::1], serve[2::1]))
    assert pairs["--max-num-batched-tokens"] == "8192" and pairs["--load-format"] == "fastsafetensors"
    assert pairs["--speculative-config"] == '{"method":"mtp","num_speculative_tokens":2}'
    assert "--no-enable-prefix-caching" in serve
    assert (pairs["--tensor-parallel-size"], pairs["--nnodes"], pairs["--node-rank"], pairs["--master-addr"],
            pairs["--master-port"]) == ("2", "2", "0", "10.10.10.1", "29500")


def test_rank_1_is_headless_and_its_own_address():
    argv, env = render(host="spark-2")
    assert env["VLLM_HOST_IP"] == "10.10.10.2" and "--headless" in argv
    assert argv[argv.index("--node-rank") + 1] == "1" and argv[argv.index("--master-addr") + 1] == "10.10.10.1"


def test_without_rdma_devices_or_host_nccl_nothing_of_them_is_rendered():
    argv, env = render(link={"hca": [], "nccl_library": "", "device_nodes": []})
    assert "NCCL_IB_HCA" not in env and "VLLM_NCCL_SO_PATH" not in env
    assert not [a for a in argv if a.startswith(("--device=", "--cap-add"))]


def test_the_lab_split_runs_gloo_over_its_own_link():
    argv, env = render(inventory="lab", host="spark-a", hosts=("spark-a", "spark-b"), link={"hca": [], "nccl_library": "", "device_nodes": []},
                       cli={"nccl_library": ""})
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "eth1"
    assert env["VLLM_HOST_IP"] == "10.89.8.10" and env["NCCL_IB_DISABLE"] == "1"
    assert argv[argv.index("--master-addr") + 1] == "10.89.8.10"
    assert not [a for a in argv if a.startswith(("--device=", "--cap-add", "--gpus"))]


THREE = ("spark-1", "spark-2", "spark-3")
FOUR = THREE + ("spark-4",)


def _flags(argv):
    serve = argv[argv.index("serve") + 1:]
    flags = ("--tensor-parallel-size", "--nnodes", "--node-rank", "--master-addr", "--master-port")
    return {flag: serve[serve.index(flag) + 1] for flag in flags}


@pytest.mark.parametrize("hosts, sizes, head", [
    (THREE, {"vllm_split_tensor_parallel_size": 3}, None),
    (FOUR, {"vllm_split_tensor_parallel_size": 4}, None),
    (FOUR, {"vllm_split_tensor_parallel_size": 2, "vllm_split_pipeline_parallel_size": 2}, None),
    (FOUR, {"vllm_split_tensor_parallel_size": 4}, "spark-3"),
])
def test_every_rank_of_three_or_four_sparks_meets_at_the_heads_link_address(hosts, sizes, head):
    extra = dict(sizes, **({"vllm_split_head": head} if head else {}))
    order = [head or hosts[0]] + [host for host in hosts if host != (head or hosts[0])]
    head_address = "10.10.10.%s" % order[0].split("-")[1]
    for host in hosts:
        argv, env = render(host=host, hosts=hosts, extra=extra)
        rank = order.index(host)
        flags = _flags(argv)
        assert flags == {"--tensor-parallel-size": str(sizes["vllm_split_tensor_parallel_size"]),
                         "--nnodes": str(len(hosts)), "--node-rank": str(rank), "--master-addr": head_address,
                         "--master-port": "29500"}, host
        assert ("--headless" in argv) == (rank != 0), host
        pipeline = sizes.get("vllm_split_pipeline_parallel_size", 1)
        if pipeline > 1:
            assert argv[argv.index("--pipeline-parallel-size") + 1] == str(pipeline)
        else:
            assert "--pipeline-parallel-size" not in argv
        assert env["VLLM_HOST_IP"] == "10.10.10.%s" % host.split("-")[1]


@pytest.mark.parametrize("hosts, host, words", [
    (("spark-1", "spark-2"), "spark-1", "vLLM split rank 0/2: "),
    (("spark-1", "spark-2"), "spark-2", "vLLM split rank 1/2: "),
    (THREE, "spark-3", "vLLM split rank 2/3: "),
    (FOUR, "spark-1", "vLLM split rank 0/4: "),
    (FOUR, "spark-4", "vLLM split rank 3/4: "),
])
def test_the_units_description_names_the_rank_of_n(hosts, host, words):
    extra = {"vllm_split_tensor_parallel_size": len(hosts)}
    templar = role_templar(_variables("example", host, list(hosts), SPARK_LINK, {"nccl_library": IMAGE_NCCL}, extra))
    description = templar.template(trust_as_template("{{ _vllm_split_service_description }}"))
    assert description.startswith(words)
    assert description.endswith(" (API on port 8000)" if words.split()[3].startswith("0/") else " (headless)")


@pytest.mark.parametrize("host, peer", [("spark-1", "10.10.10.2"), ("spark-2", "10.10.10.1"),
                                        ("spark-3", "10.10.10.1"), ("spark-4", "10.10.10.1")])
def test_each_rank_pings_the_head_and_the_head_pings_rank_1(host, peer):
    templar = role_templar(_variables("example", host, list(FOUR), SPARK_LINK, {"nccl_library": IMAGE_NCCL},
                                      {"vllm_split_tensor_parallel_size": 4}))
    assert templar.template(trust_as_template("{{ _vllm_split_peer_address }}")) == peer


def readme_block(argv, env):
    """The command and environment as roles/vllm_split/README.md shows them."""
    lines = ["# /etc/factory-floor/vllm-split.service.env (root only; VLLM_API_KEY and FACTORY_FLOOR_CONFIG left out)"]
    lines += ["%s=%s" % (key, env[key]) for key in sorted(env)]
    lines.append("")
    lines.append("# ExecStart= of vllm-split.service on spark-1 (rank 0)")
    words = [shlex.quote(word) for word in argv]
    out, line = [], []
    for word in words:
        if word.startswith("-") and line:
            out.append(" ".join(line))
            line = []
        line.append(word)
    out.append(" ".join(line))
    lines.append(" \\\n  ".join(out))
    return "\n".join(lines)


def test_the_readme_shows_what_the_roles_render_for_a_gb10_pair():
    with open(os.path.join(ROOT, "roles", "vllm_split", "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    found = re.search(r"<!-- rendered: tests/unit/roles/test_vllm_split_gb10.py -->\n```sh\n(.*?)\n```", readme, re.S)
    assert found, "roles/vllm_split/README.md lost its rendered block"
    assert found.group(1) == readme_block(*render()), "re-render it: python tests/unit/roles/test_vllm_split_gb10.py"


if __name__ == "__main__":
    print(readme_block(*render()))


def test_the_split_preflight_hands_its_model_to_the_vllm_preflight_on_a_site_that_keeps_the_default():
    # vllm_split_model defaults to "{{ vllm_model }}"; the include of the vllm role's preflight sets vllm_model for
    # it. Passed straight through, vllm_model referred to itself: a recursive template on every site without
    # vllm_split_model in its inventory (the example's), which failed the switch to split in its preflight.
    tasks = _load("roles", "vllm_split", "tasks", "preflight.yml")
    variables = _variables("example", "spark-1", ["spark-1", "spark-2"], SPARK_LINK, {"nccl_library": IMAGE_NCCL})
    assert "vllm_split_model" not in _load("inventory", "example", "group_vars", "gb10.yml")
    for task in tasks:
        facts = task.get("ansible.builtin.set_fact")
        if facts:   # what set_fact does: template the value once, in the role's context
            templar = role_templar(variables)
            variables.update({name: templar.template(_trusted(value)) for name, value in facts.items()})
        include = task.get("ansible.builtin.include_role") or {}
        if include.get("tasks_from") == "preflight" and include.get("name") == "factory_floor.llm.vllm":
            scoped = dict(variables, **_trusted(task.get("vars") or {}))
            assert role_templar(scoped).template(trust_as_template("{{ vllm_model }}")) == \
                "/models/Qwen3-Next-80B-A3B-Instruct-NVFP4"
            return
    pytest.fail("roles/vllm_split/tasks/preflight.yml includes no vllm preflight")


def test_a_site_without_link_settings_renders_the_rank_it_stops():
    # Seen by a new user: a replicas-only inventory (no vllm_link_interface, no
    # vllm_link_address) on hosts that still had the split's units; deploy's "stop the
    # topology that is not wanted" rendered the rank and failed with "has no attribute ''"
    # (the head's address looked up the facts of an interface named "").
    variables = _variables("example", "spark-1", ["spark-1", "spark-2"], SPARK_LINK, {"nccl_library": IMAGE_NCCL})
    for name in ("spark-1", "spark-2"):
        variables["hostvars"][name] = {k: v for k, v in variables["hostvars"][name].items()
                                       if k not in ("vllm_link_interface", "vllm_link_address")}
        variables["hostvars"][name]["ansible_facts"] = {"default_ipv4": {"address": "192.0.2.1"}}
    variables.pop("vllm_link_address", None)
    variables["vllm_link_interface"] = ""
    templar = role_templar(variables)
    assert templar.template(trust_as_template("{{ _vllm_split_head_address }}")) == ""
    assert templar.template(trust_as_template("{{ _vllm_split_peer_address }}")) == ""


@pytest.mark.parametrize("hosts, nnodes", [(["spark-1"], 2), (["spark-1", "spark-2"], 2), (list(THREE), 3), (list(FOUR), 4)])
def test_the_image_check_asks_the_build_about_the_groups_nnodes(hosts, nnodes):
    # The deploy and switch preflights ask the build about the split's flags with the vllm role's settings (a site of
    # one engine host still asks about a pair: --nnodes 1 is no split).
    templar = role_templar(_variables("example", hosts[0], hosts, SPARK_LINK, {"nccl_library": IMAGE_NCCL}))
    assert templar.template(trust_as_template("{{ _vllm_cli_check_settings.split.nnodes }}")) == nnodes


@pytest.mark.parametrize("rank, host", list(enumerate(FOUR)))
def test_the_four_spark_example_splits_over_four_ranks_meeting_at_spark_1(rank, host):
    argv, env = render(inventory="example-four", host=host, hosts=FOUR)
    assert _flags(argv) == {"--tensor-parallel-size": "4", "--nnodes": "4", "--node-rank": str(rank),
                            "--master-addr": "10.10.10.1", "--master-port": "29500"}
    assert ("--headless" in argv) == (rank > 0) and env["VLLM_HOST_IP"] == "10.10.10.%d" % (rank + 1)
