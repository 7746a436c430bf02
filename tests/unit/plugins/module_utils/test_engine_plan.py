# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The engine plan (``_engine_plan``): the command line per runtime, the environment, the fingerprint, and whether a
restart is pending - what ``roles/vllm/tasks/plan.yml`` decided in Jinja before.

- ``fixtures/engine_plan/jinja.json``: what the role's Jinja composed for every inventory of the checkout (each
  engine host, the replica's and the split's unit, both runtimes, variants on the lab), recorded by the transition
  test of the commit that added ``_engine_plan``; Python composes the same, to the byte.
- the per-runtime table: one row per thing the command line does, written out.
- the fingerprint checked against Ansible's own ``to_json`` and ``hash`` of the role's old expression.
- the restart decision: one row per reason.
"""

from __future__ import annotations

import json
import os

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_plan as ep
from ansible_collections.factory_floor.llm.plugins.module_utils._vllm_args import systemd_exec_line
from ansible_collections.factory_floor.llm.tests.unit.plugins import systemd_dump

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "fixtures", "engine_plan", "jinja.json"), encoding="utf-8") as _handle:
    JINJA = json.load(_handle)


@pytest.mark.parametrize("row", JINJA, ids=[row["where"][0] for row in JINJA])
def test_composes_what_the_roles_jinja_composed(row):
    got = ep.compose(row["args"], row["where"][0].split(" ")[1])
    assert got["argv"] == row["argv"]
    assert got["environment"] == row["environment"]
    assert got["fingerprint"] == row["fingerprint"]


def test_the_table_covers_every_inventory_both_runtimes_and_both_topologies():
    where = [place for row in JINJA for place in row["where"]]
    for inventory in ("lab", "lab-single", "lab-vip", "example", "example-single"):
        for case in ("replica/inventory", "replica/venv"):
            assert any(place.startswith(inventory + " ") and place.endswith(case) for place in where), (inventory, case)
    for inventory in ("lab", "lab-vip", "example"):
        assert any(place.startswith(inventory + " ") and place.endswith("split/inventory") for place in where)
    runtimes = {row["args"]["runtime"] for row in JINJA}
    assert runtimes == {"venv", "container"}


# --------------------------------------------------------------------------- the command line, per runtime

BASE = {
    "unit": "vllm-replica.service", "runtime": "container",
    "settings": {"model": "/models/m", "served_model_name": "m", "port": 8000, "chat_template": None, "config": None,
                 "speculative_config": {}},
    "service_settings": {}, "extra_args": [], "venv": "/opt/vllm",
    "container_engine": "/usr/bin/docker", "container_image": "vllm/vllm-openai:v0.32.0", "container_pull": False,
    "container_log_driver": "none", "container_resource_args": ["--gpus=all", "--ipc=host"],
    "container_cache_dir": "/var/cache/vllm", "container_cache_path": "/root/.cache", "container_run_args": [],
    "service_run_args": [], "stop_timeout": 40, "env_file": "/etc/factory-floor/vllm-replica.service.env",
    "env": {}, "env_host": {}, "service_env": {}, "api_key": "sk-test", "api_key_next": "",
}
SERVE = ["serve", "/models/m", "--served-model-name", "m", "--port", "8000"]
DOCKER = ["/usr/bin/docker", "run", "--name", "vllm-replica", "--network=host", "--pull=never", "--stop-timeout=40",
          "--log-driver=none", "--env-file", "/etc/factory-floor/vllm-replica.service.env", "--gpus=all", "--ipc=host",
          "--volume=/var/cache/vllm:/root/.cache", "--volume=/models/m:/models/m:ro", "--entrypoint", "vllm",
          "vllm/vllm-openai:v0.32.0"]


def params(**changes):
    settings = dict(BASE["settings"], **changes.pop("settings", {}))
    return dict(BASE, settings=settings, **changes)


ARGV = [
    ("venv: the virtualenv's vllm serve", params(runtime="venv"), ["/opt/vllm/bin/vllm"] + SERVE),
    ("container: docker run, attached, named after the unit, its env file, cache and model mounted read-only",
     params(), DOCKER + SERVE),
    ("container: podman, the split's unit", params(container_engine="/usr/bin/podman", unit="vllm-split.service",
                                                   container_resource_args=["--device=nvidia.com/gpu=all"],
                                                   env_file="/etc/factory-floor/vllm-split.service.env"),
     ["/usr/bin/podman", "run", "--name", "vllm-split", "--network=host", "--pull=never", "--stop-timeout=40",
      "--log-driver=none", "--env-file", "/etc/factory-floor/vllm-split.service.env", "--device=nvidia.com/gpu=all",
      "--volume=/var/cache/vllm:/root/.cache", "--volume=/models/m:/models/m:ro", "--entrypoint", "vllm",
      "vllm/vllm-openai:v0.32.0"] + SERVE),
    ("container: pulled when missing, no log driver, no cache, no resource options",
     params(container_pull=True, container_log_driver="", container_cache_dir="", container_resource_args=[]),
     ["/usr/bin/docker", "run", "--name", "vllm-replica", "--network=host", "--pull=missing", "--stop-timeout=40",
      "--env-file", "/etc/factory-floor/vllm-replica.service.env", "--volume=/models/m:/models/m:ro",
      "--entrypoint", "vllm", "vllm/vllm-openai:v0.32.0"] + SERVE),
    ("container: the topology's run options, then the inventory's, before the image",
     params(service_run_args=["--cap-add=IPC_LOCK"], container_run_args=["--ulimit=memlock=-1"]),
     DOCKER[:-3] + ["--cap-add=IPC_LOCK", "--ulimit=memlock=-1"] + DOCKER[-3:] + SERVE),
    ("the topology's settings win over the role's, the extra arguments last",
     params(runtime="venv", service_settings={"model": "/models/s", "tensor_parallel_size": 2, "headless": True},
            extra_args=["--enforce-eager"]),
     ["/opt/vllm/bin/vllm", "serve", "/models/s", "--served-model-name", "m", "--port", "8000",
      "--tensor-parallel-size", "2", "--headless", "--enforce-eager"]),
]


@pytest.mark.parametrize("what,given,expected", ARGV, ids=[row[0] for row in ARGV])
def test_argv(what, given, expected):
    assert ep.argv(given) == expected, what


MOUNTS = [
    ("the model directory", {}, ["/models/m"]),
    ("a chat template, a draft model and a --config file outside it",
     {"chat_template": "/etc/vllm/t.jinja", "speculative_config": {"model": "/models/draft"},
      "config": "/etc/factory-floor/keys.yaml"},
     ["/models/m", "/etc/vllm/t.jinja", "/models/draft", "/etc/factory-floor/keys.yaml"]),
    ("inside the model directory: its mount has them",
     {"chat_template": "/models/m/t.jinja", "speculative_config": {"model": "/models/m/mtp"}}, ["/models/m"]),
    ("a sibling whose name starts like it is outside", {"chat_template": "/models/m2/t.jinja"},
     ["/models/m", "/models/m2/t.jinja"]),
    ("a model directory written with a slash", {"model": "/models/m/", "chat_template": "/models/m/t.jinja"},
     ["/models/m/"]),
    ("a hub model: nothing of it to mount, the template still", {"model": "org/model", "chat_template": "/etc/t.jinja"},
     ["/etc/t.jinja"]),
    ("names and relative paths are not mounted", {"chat_template": "chatml", "speculative_config": {"method": "mtp"}},
     ["/models/m"]),
    ("the same file named twice: once", {"model": "org/model", "chat_template": "/etc/t.jinja",
                                         "config": "/etc/t.jinja"}, ["/etc/t.jinja"]),
    # Ansible's unique filter, which plan.yml used, compares case-insensitively and mounted only the first.
    ("two files whose names differ only in case: both", {"chat_template": "/etc/vllm/T.jinja",
                                                         "speculative_config": {"model": "/etc/vllm/t.jinja"}},
     ["/models/m", "/etc/vllm/T.jinja", "/etc/vllm/t.jinja"]),
    ("paths with spaces, $ and backslashes, as they are", {"model": "/models/a b$c\\d"}, ["/models/a b$c\\d"]),
]


@pytest.mark.parametrize("what,settings,expected", MOUNTS, ids=[row[0] for row in MOUNTS])
def test_mounts(what, settings, expected):
    assert ep.mounts(dict(BASE["settings"], **settings)) == expected, what
    argv = ep.argv(params(settings=settings))
    assert [word for word in argv if word.startswith("--volume=") and word.endswith(":ro")] == [
        "--volume=%s:%s:ro" % (path, path) for path in expected]


ADVERSARIAL = ["a\\b", "${HOME}", "$x", "%h", '"q"', "it's", "sp ace", "tab\\there", "100%", "--opt=${x}", ""]


def test_values_reach_the_command_line_as_written_and_execstart_keeps_them():
    """Issue 33 item 15: backslashes, ``${}``, ``$``, ``%`` and quotes in the inventory reach vLLM unchanged."""
    argv = ep.argv(params(runtime="venv", settings={"model": "/models/a b$c\\d"}, extra_args=ADVERSARIAL))
    assert argv[2] == "/models/a b$c\\d" and argv[-len(ADVERSARIAL):] == ADVERSARIAL
    assert systemd_exec_line(argv) == (
        ':/opt/vllm/bin/vllm serve "/models/a b$c\\\\d" --served-model-name m --port 8000 "a\\\\b" "${HOME}" "$x" "%%h"'
        ' "\\"q\\"" "it\'s" "sp ace" "tab\\\\there" "100%%" "--opt=${x}" ""')


@pytest.mark.skipif(not systemd_dump.AVAILABLE, reason=systemd_dump.WHY_NOT)
def test_systemd_reads_the_execstart_line_back_as_the_argv():
    argv = ep.argv(params(settings={"model": "/models/a b$c\\d"}, extra_args=ADVERSARIAL,
                          container_run_args=["--label=x=${y}"]))
    unit = "[Unit]\nDescription=t\n[Service]\nExecStart=%s\n" % systemd_exec_line(argv)
    assert systemd_dump.exec_start(unit) == argv


# --------------------------------------------------------------------------- the environment

def test_environment_merges_in_order_a_later_one_wins():
    env = ep.environment(params(env={"A": "env", "B": "env", "TRITON_CACHE_DIR": "/x"}, env_host={"B": "host", "C": "host"},
                                service_env={"C": "split"}))
    assert env == {"TRITON_CACHE_DIR": "/x", "A": "env", "B": "host", "C": "split"}


@pytest.mark.parametrize("changes,expected", [
    ({}, {"TRITON_CACHE_DIR": "/root/.cache/triton"}),
    ({"container_cache_dir": ""}, {}),
    ({"runtime": "venv"}, {}),
], ids=["container with its cache kept: Triton's kernels there", "no cache kept", "venv"])
def test_the_runtime_adds_tritons_cache(changes, expected):
    assert ep.environment(params(**changes)) == expected


# --------------------------------------------------------------------------- refusals (names and types, never values)

SECRET = "hf_SeCrEt4f1b9e77d0c2"
REFUSALS = [
    ("a runtime of another name", {"runtime": "docker"}, ["vllm_runtime must be venv or container", "'docker'"]),
    ("vllm_env as text", {"env": "HF_TOKEN=" + SECRET},
     ["vllm_env (str), vllm_env_host (dict) and the role's vllm_service_env (dict) must be mappings (NAME: value) on "
      "spark-t: write vllm_env: {NAME: value} in the inventory."]),
    ("vllm_env_host as a list", {"env_host": [SECRET]}, ["vllm_env (dict), vllm_env_host (list)"]),
    ("vllm_extra_args as text", {"extra_args": "--enforce-eager"}, ["extra args (vllm_extra_args) must be a list, one item per argument, got str"]),
    ("vllm_container_run_args as text", {"container_run_args": "--ulimit=memlock=-1"},
     ["container_run_args (vllm_container_run_args) must be a list, one item per argument, got str"]),
    ("the topology's run options as a mapping", {"service_run_args": {"a": 1}},
     ["service_run_args (vllm_service_run_args) must be a list"]),
    ("a setting vLLM does not have", {"service_settings": {"max_num_seq": 8}}, ["unknown vLLM setting(s) max_num_seq"]),
    ("no model", {"settings": {"model": ""}}, ["model is required"]),
    ("settings that are no mapping", {"service_settings": ["--tp", "2"]},
     ["service_settings (vllm_service_settings) must be a mapping of vLLM settings, got list"]),
]


@pytest.mark.parametrize("what,changes,words", REFUSALS, ids=[row[0] for row in REFUSALS])
def test_refusals_name_the_variable_never_a_value(what, changes, words):
    with pytest.raises(ep.EnginePlanError) as refused:
        ep.compose(params(**changes), "spark-t")
    for word in words:
        assert word in str(refused.value), what
    assert SECRET not in str(refused.value)


# --------------------------------------------------------------------------- the fingerprint

# The role's expression before the move (plan.yml), evaluated by Ansible itself: the fingerprint an engine started
# before the move carries must still match, or every engine would restart once for nothing.
ROLE_EXPRESSION = ("{{ ([argv, environment | dictsort, api_key | hash('sha256')]"
                   " + ([api_key_next | hash('sha256')] if api_key_next | length > 0 else [])) | to_json | hash('sha256') }}")
FINGERPRINTS = [
    ("lab-like", ["/opt/vllm/bin/vllm", "serve", "/m", "--port", "8000"], {"VLLM_CPU_KVCACHE_SPACE": "1"}, "lab-key", ""),
    ("no key, no environment", ["/usr/bin/docker", "run", "serve"], {}, "", ""),
    ("a rotation", ["/opt/vllm/bin/vllm", "serve", "/m"], {"A": "1"}, "old-key", "new-key"),
    ("keys sorted without case, numbers and booleans as JSON", ["x"], {"b": 1, "A": True, "c": "é", "B2": None}, "k", ""),
    ("backslashes, quotes and $ in words and values", ADVERSARIAL, {"HF_TOKEN": 'hf_$x\\y"z'}, 'k\\"é', ""),
]


@pytest.mark.parametrize("what,argv,environment,key,key_next", FINGERPRINTS, ids=[row[0] for row in FINGERPRINTS])
def test_fingerprint_is_the_roles_expression(what, argv, environment, key, key_next):
    variables = {"argv": argv, "environment": environment, "api_key": key, "api_key_next": key_next}
    templar = Templar(loader=DataLoader(), variables=variables)
    assert ep.fingerprint(argv, environment, key, key_next) == templar.template(trust_as_template(ROLE_EXPRESSION))


def test_fingerprint_changes_with_everything_it_covers():
    base = (["vllm", "serve", "/m"], {"A": "1"}, "k", "")
    seen = {ep.fingerprint(*base)}
    for changed in ((["vllm", "serve", "/n"], {"A": "1"}, "k", ""), (["vllm", "serve", "/m"], {"A": "2"}, "k", ""),
                    (["vllm", "serve", "/m"], {"A": "1"}, "k2", ""), (["vllm", "serve", "/m"], {"A": "1"}, "k", "n")):
        seen.add(ep.fingerprint(*changed))
    assert len(seen) == 5
    # The order the environment is written in does not count.
    assert ep.fingerprint(["x"], {"A": "1", "B": "2"}, "k") == ep.fingerprint(["x"], {"B": "2", "A": "1"}, "k")


# --------------------------------------------------------------------------- the restart decision

IMAGE = "vllm/vllm-openai:v0.32.0"
NEW_ID = "sha256:5d1e0c2b3a4f69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0"
OLD_ID = "sha256:0f3c1b7a9e2d4c6b8a0f1e3d5c7b9a1f2e4d6c8b0a1f3e5d7c9b1a2f4e6d8c0b"


def engine(running=True, config_differs=False, removed=(), added=()):
    """What vllm_engine_info returns."""
    return {"running": running, "config_differs": config_differs, "args_removed": list(removed),
            "args_added": list(added), "need_daemon_reload": False, "main_pid": 4242 if running else 0}


def images(present=True, image_id=NEW_ID, running=True, running_id=NEW_ID, running_image=IMAGE):
    """What container_image_info returns for IMAGE and the unit's container."""
    return {"image": {"ref": IMAGE, "present": present, "id": image_id if present else ""},
            "containers": {"vllm-replica": {"exists": running, "running": running, "pid": 77 if running else 0,
                                            "image": running_image if running else "",
                                            "image_id": running_id if running else ""}}}


DECISIONS = [
    ("venv, nothing runs", "venv", engine(running=False), None),
    ("venv, runs this configuration", "venv", engine(), None),
    ("venv, another command line", "venv", engine(config_differs=True, removed=["--max-num-seqs 12"],
                                                  added=["--max-num-seqs 10"]), None),
    ("venv, only the environment or a key changed", "venv", engine(config_differs=True), None),
    ("container, nothing runs", "container", engine(running=False), images(running=False)),
    ("container, runs this configuration and image", "container", engine(), images()),
    ("container, another command line", "container", engine(config_differs=True, added=["--enforce-eager"]), images()),
    ("container, the tag now names another build", "container", engine(), images(running_id=OLD_ID)),
    ("container, another build and another command line", "container",
     engine(config_differs=True, removed=["--max-num-seqs 12"], added=["--max-num-seqs 10"]),
     images(running_id=OLD_ID, running_image="vllm/vllm-openai:v0.31.0")),
    ("container, the wanted image not pulled yet: the command line decides", "container", engine(),
     images(present=False, running_id=OLD_ID)),
    ("container, the unit runs but its container does not", "container", engine(), images(running=False)),
    ("container, the container runs an old build but the unit has no process", "container", engine(running=False),
     images(running_id=OLD_ID)),
]


def image(running_image=IMAGE, running_id=NEW_ID, wanted_id=NEW_ID, changed=False):
    return {"wanted": IMAGE, "wanted_id": wanted_id, "running": running_image, "running_id": running_id,
            "changed": changed}


# What plan.yml's "Note what a service run would do" decided for each row (compared while it existed).
DECIDED = {
    "venv, nothing runs": (False, False, {}, ""),
    "venv, runs this configuration": (True, False, {}, ""),
    "venv, another command line": (True, True, {}, "was --max-num-seqs 12, now --max-num-seqs 10"),
    "venv, only the environment or a key changed": (
        True, True, {}, "the environment, the API key or the container options changed"),
    "container, nothing runs": (False, False, image(running_image="", running_id=""), ""),
    "container, runs this configuration and image": (True, False, image(), ""),
    "container, another command line": (True, True, image(), "now --enforce-eager"),
    "container, the tag now names another build": (
        True, True, image(running_id=OLD_ID, changed=True),
        "image vllm/vllm-openai:v0.32.0 (sha256:0f3c1b7a9e2d) -> vllm/vllm-openai:v0.32.0 (sha256:5d1e0c2b3a4f)"),
    "container, another build and another command line": (
        True, True, image(running_image="vllm/vllm-openai:v0.31.0", running_id=OLD_ID, changed=True),
        "was --max-num-seqs 12, now --max-num-seqs 10, "
        "image vllm/vllm-openai:v0.31.0 (sha256:0f3c1b7a9e2d) -> vllm/vllm-openai:v0.32.0 (sha256:5d1e0c2b3a4f)"),
    "container, the wanted image not pulled yet: the command line decides": (
        True, False, image(running_id=OLD_ID, wanted_id=""), ""),
    "container, the unit runs but its container does not": (True, False, image(running_image="", running_id=""), ""),
    "container, the container runs an old build but the unit has no process": (
        False, False, image(running_id=OLD_ID, changed=True), ""),
}


@pytest.mark.parametrize("what,runtime,engine_info,image_info", DECISIONS, ids=[row[0] for row in DECISIONS])
def test_decide(what, runtime, engine_info, image_info):
    running, pending, state, change = DECIDED[what]
    assert ep.decide(runtime, engine_info, IMAGE, image_info, "vllm-replica.service") == {
        "running": running, "restart_pending": pending, "args_removed": engine_info["args_removed"],
        "args_added": engine_info["args_added"], "image": state, "change": change}


def test_the_options_left_out_are_the_roles_variables():
    variables = {"vllm_service_name": "vllm-split.service", "vllm_runtime": "venv", "_vllm_config_dir": "/etc/ff",
                 "vllm_api_key": "k"}

    def read(name):
        return variables[name]  # KeyError: not defined where the task runs

    assert ep.role_args(read, {}) == {"unit": "vllm-split.service", "runtime": "venv", "api_key": "k",
                                      "env_file": "/etc/ff/vllm-split.service.env"}
    # What the task gives wins, and names the env file's unit.
    assert ep.role_args(read, {"unit": "vllm-replica.service", "api_key": "x"}) == {
        "runtime": "venv", "env_file": "/etc/ff/vllm-replica.service.env"}
    assert "env_file" not in ep.role_args(read, {"env_file": ""})
    assert set(ep.ROLE_VARIABLES) | {"env_file", "systemctl"} == set(
        __import__("ansible_collections.factory_floor.llm.plugins.action.engine_plan",
                   fromlist=["ARGUMENT_SPEC"]).ARGUMENT_SPEC)
