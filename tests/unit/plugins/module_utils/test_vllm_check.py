# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What ``_vllm_check`` refuses - one row per refusal - and what it lets through.

The engines' preflight and image refusals were Jinja in the vllm role's tasks; every message
they had (fixtures/vllm_check/refusals.yml, collected from those files before the move) must
still be produced, word for word, by a row here, and no row may produce a message they did not
have. No message may show a secret."""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _vllm_check as vc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "vllm_check", "refusals.yml")

SECRET = "hf_SeCrEt4f1b9e77d0c2"
KEY = "lab-key-7f3e9a2c41d86b05"
UNITS = {"replicas": ["vllm-replica.service"], "split": ["vllm-split.service"]}
ID_A = "sha256:" + "a" * 64
ID_B = "sha256:" + "b" * 64

# A container engine that can run: the role's defaults, as the preflight reads them.
with open(os.path.join(os.path.dirname(FIXTURE), "engine.yml"), encoding="utf-8") as _handle:
    ENGINE = dict(yaml.safe_load(_handle), _vllm_units=UNITS)
SEEN = {
    "model_dir": {"stat": {"exists": True, "isdir": True}},
    "venv_vllm": {"skipped": True},
    "tool_parsers": {"skipped": True},
    "units_active": {"rc": 3, "stdout_lines": ["inactive", "inactive"]},
    "port_listeners": {"rc": 0, "stdout": ""},
    "port_units": {"skipped": True},
}
VENV = dict(ENGINE, vllm_runtime="venv", vllm_tool_call_parser="hermes")
VENV_SEEN = dict(SEEN, venv_vllm={"stat": {"exists": True}},
                 tool_parsers={"rc": 0, "stdout_lines": ["hermes", "llama3_json", "qwen3_coder"]})
LISTENER = 'LISTEN 0 128 *:8000 *:* users:(("python3",pid=4120,fd=3))\n'
DEPLOY = {"topology": "replicas", "groups": {"gb10": ["spark-1", "spark-2"], "proxy": ["gw"]},
          "site_engine_group": "gb10", "site_proxy_group": "proxy"}
ONE = {"inventory_hostname": "spark-1", "topology": "replicas", "groups": {"gb10": ["spark-1"], "proxy": ["gw"]},
       "site_engine_group": "gb10", "vllm_service_plan": {"restart_pending": True, "change": "max_num_seqs 8 -> 12"},
       "vllm_restart_force": False}
PLAN = {"incumbent": {"host": "spark-1", "topology": "split"}, "lost_hosts": []}
SWITCH = {"inventory_hostname": "spark-1", "vllm_switch_plan": PLAN, "site_engine_group": "gb10",
          "site_proxy_group": "proxy"}
PROXIES = {"groups": {"gb10": ["spark-1", "spark-2"], "proxy": ["gw-1", "gw-2"]}, "site_proxy_group": "proxy",
           "ansible_inventory_sources": ["/srv/ff/inventory/site"]}
MODEL = {"file": "upstream.json", "setting": "nginx_proxy_model", "default_from": "vllm_served_model_name", "host": None,
         "applied": "old-chat", "wanted": "lab-chat", "secret": False, "engines": True, "blocks": True}
API_KEY = {"file": "upstream.json", "setting": "nginx_proxy_api_key", "default_from": "vllm_api_key", "host": None,
           "applied": None, "wanted": None, "secret": True, "engines": True, "blocks": True}
INTERVAL = {"file": "upstream.json", "setting": "nginx_proxy_check_interval", "default_from": None, "host": None,
            "applied": 1.0, "wanted": 1.5, "secret": False, "engines": False, "blocks": False}
NGINX_CONF = {"file": "nginx.conf", "setting": "nginx.conf", "default_from": None, "host": None, "applied": None,
              "wanted": None, "secret": False, "engines": False, "blocks": True,
              "directives": ["listen", "proxy_read_timeout"]}
SAME = {"deployed": True, "differences": []}
IMAGE = {"inventory_hostname": "spark-1", "vllm_runtime": "container", "vllm_container_engine": "docker",
         "vllm_container_pull": False, "ansible_facts.architecture": "aarch64"}


def info(**image):
    """container_image_info's result for a present, pinned image of this host's architecture, changed by ``image``."""
    found = {"ref": "vllm/vllm-openai:v0.32.0", "name": "vllm/vllm-openai", "tag": "v0.32.0", "pinned": True,
             "present": True, "id": ID_A, "repo_digests": [], "architecture": "arm64", "host_architecture": "arm64",
             "architecture_matches": True, "expected_digest": "", "digest_matches": None}
    found.update(image)
    return {"image_info": {"engine": "/usr/bin/docker", "image": found, "containers": {}}}


def fact(image_id=ID_A, ref="vllm/vllm-openai:v0.32.0", running=None):
    return {"image": {"ref": ref, "present": True, "id": image_id},
            "running": {"vllm-replica.service": running or {"exists": False, "running": False, "image_id": "", "image": ""},
                        "vllm-split.service": {"exists": False, "running": False, "image_id": "", "image": ""}}}


BUILDS = {"inventory_hostname": "spark-1", "vllm_runtime": "container", "vllm_image_check": fact(),
          "vllm_image_check_running": True, "vllm_deploy_image_change": False,
          "vllm_container_image": "vllm/vllm-openai:v0.32.0", "topology": "replicas", "_vllm_units": UNITS,
          "ansible_play_hosts": ["spark-1", "spark-2"]}
RUNS_OLD = {"exists": True, "running": True, "image_id": ID_B, "image": "vllm/vllm-openai:v0.31.0"}
RUNS_MOVED = {"exists": True, "running": True, "image_id": ID_B, "image": "vllm/vllm-openai:v0.32.0"}


def row(check, variables, observed, refused, words, never=(), id=None):  # pylint: disable=redefined-builtin
    return pytest.param(check, variables, observed, refused, words, never, id=id)


# (check, variables, what the host said, the refusals expected (check ids), words the message holds, never shown)
REFUSED = [
    # -- engine: the settings, each an item of one message
    row("engine", dict(ENGINE, vllm_runtime="docker"), SEEN, ["settings"],
        ["vLLM settings on spark-1 are not valid: vllm_runtime=docker (venv or container).",
         "Fix the variable named in host_vars/spark-1.yml or group_vars."], id="runtime"),
    row("engine", dict(ENGINE, vllm_model=""), SEEN, ["settings"],
        ["vllm_model is empty (the model directory, required)"], id="model-empty"),
    row("engine", dict(ENGINE, vllm_served_model_name=""), SEEN, ["settings"],
        ["vllm_served_model_name is empty (required)"], id="served-model-name-empty"),
    row("engine", dict(ENGINE, vllm_port=70000), SEEN, ["settings"], ["vllm_port=70000 (1-65535)"], id="port-range"),
    row("engine", dict(ENGINE, vllm_port="http"), SEEN, ["settings"], ["vllm_port=http (1-65535)"], id="port-word"),
    row("engine", dict(ENGINE, vllm_max_num_seqs=0), SEEN, ["settings"], ["vllm_max_num_seqs=0 (>= 1)"],
        id="max-num-seqs"),
    row("engine", dict(ENGINE, vllm_max_model_len="0"), SEEN, ["settings"], ["vllm_max_model_len=0 (tokens, >= 1)"],
        id="max-model-len"),
    row("engine", dict(ENGINE, vllm_kv_cache_dtype="int4"), SEEN, ["settings"],
        ["vllm_kv_cache_dtype=int4 (one of auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla)"],
        id="kv-cache-dtype"),
    row("engine", dict(ENGINE, vllm_gpu_memory_utilization=1.0), SEEN, ["settings"],
        ["vllm_gpu_memory_utilization=1.0 (a fraction strictly between 0 and 1, e.g. 0.74)"], id="gpu-memory-one"),
    row("engine", dict(ENGINE, vllm_gpu_memory_utilization="0"), SEEN, ["settings"],
        ["vllm_gpu_memory_utilization=0 (a fraction"], id="gpu-memory-zero"),
    row("engine", dict(ENGINE, vllm_enable_auto_tool_choice=True, vllm_tool_call_parser=None), SEEN, ["settings"],
        ["vllm_tool_call_parser is empty (required when vllm_enable_auto_tool_choice is true)"], id="no-parser"),
    row("engine", dict(ENGINE, vllm_shutdown_timeout=-1), SEEN, ["settings"], ["vllm_shutdown_timeout=-1 (seconds, >= 0)"],
        id="shutdown-timeout"),
    row("engine", dict(ENGINE, vllm_extra_args=["--enforce-eager", "--api-key=" + SECRET]), SEEN, ["settings"],
        ["vllm_extra_args has --api-key (the key would be on the command line, readable in /proc and ps): set "
         "vllm_api_key"], [SECRET], id="api-key-in-extra-args"),
    row("engine", dict(ENGINE, vllm_env={"HF_TOKEN": SECRET + "\n"}), SEEN, ["settings"],
        ["vllm_env HF_TOKEN holds a newline or a backslash, or starts with a quote, or starts or ends with whitespace: "
         "systemd's EnvironmentFile= (and the container engine's --env-file) would not read it as the inventory says; "
         "give the value without them"], [SECRET], id="env-newline"),
    row("engine", dict(ENGINE, vllm_env_host={"TOKEN": '"' + SECRET + '"', "OK": "it's fine"}), SEEN, ["settings"],
        ["vllm_env_host TOKEN holds a newline"], [SECRET, "vllm_env_host OK"], id="env-host-quoted"),
    row("engine", dict(ENGINE, vllm_container_engine="lxc"), SEEN, ["settings"],
        ["vllm_container_engine=lxc (docker or podman)"], id="container-engine"),
    row("engine", dict(ENGINE, vllm_container_image="vllm openai"), SEEN, ["settings"],
        ["vllm_container_image is empty or has spaces (NAME:TAG, NAME@sha256:DIGEST)"], id="container-image-spaces"),
    row("engine", dict(ENGINE, vllm_container_image_digest="sha256:abc"), SEEN, ["settings"],
        ['vllm_container_image_digest=sha256:abc (sha256: and 64 hex digits, or "")'], id="container-digest"),
    row("engine", dict(ENGINE, vllm_container_ipc="", vllm_container_shm_size="16 GB"), SEEN, ["settings"],
        ['vllm_container_shm_size=16 GB (a size such as 16g, or "")'], id="shm-size"),
    row("engine", dict(ENGINE, vllm_container_shm_size="16g"), SEEN, ["settings"],
        ["vllm_container_shm_size=16g does nothing with vllm_container_ipc: host (the host's /dev/shm is used): leave "
         'it empty, or set vllm_container_ipc: "" for a /dev/shm of that size'], id="shm-size-with-ipc-host"),
    row("engine", dict(ENGINE, vllm_container_cache_dir="cache"), SEEN, ["settings"],
        ["vllm_container_cache_dir=cache, vllm_container_cache_path=/root/.cache (absolute paths, on the host and in "
         'the container; or vllm_container_cache_dir: "" to keep no cache)'], id="cache-relative"),
    row("engine", dict(ENGINE, vllm_container_run_args=["--cap-add=SYS_NICE", "-eHF_TOKEN=" + SECRET, "--env=X=1",
                                                        "--rm"]), SEEN, ["settings"],
        ["vllm_container_run_args has -e: set vllm_env or vllm_env_host instead, which go to the root-only env file, "
         "not the command line; vllm_container_run_args has --env: set vllm_env",
         "vllm_container_run_args has --rm: the unit removes the container itself, synchronously, in ExecStopPost="],
        [SECRET, "--cap-add"], id="run-args"),
    # -- engine: what the host has
    row("engine", ENGINE, dict(SEEN, model_dir={"stat": {"exists": False}}), ["model_dir"],
        ["vllm_model=/models/m does not exist (or is not a directory) on spark-1. Copy the model there or set "
         "vllm_model to where it is."], id="model-dir-missing"),
    row("engine", ENGINE, dict(SEEN, model_dir={"stat": {"exists": True, "isdir": False}}), ["model_dir"],
        ["vllm_model=/models/m does not exist (or is not a directory)"], id="model-dir-a-file"),
    row("engine", VENV, dict(VENV_SEEN, venv_vllm={"stat": {"exists": False}}), ["venv"],
        ["/opt/vllm/bin/vllm not found on spark-1: install vLLM there or set vllm_venv."], id="venv-without-vllm"),
    row("engine", dict(VENV, vllm_tool_call_parser="qwen9"), VENV_SEEN, ["tool_call_parser"],
        ["vllm_tool_call_parser=qwen9 is not known to the vLLM in /opt/vllm on spark-1. Known: hermes, llama3_json, "
         "qwen3_coder."], id="parser-unknown"),
    row("engine", ENGINE, dict(SEEN, port_listeners={"rc": 0, "stdout": LISTENER},
                               port_units={"rc": 0, "stdout_lines": ["jupyter.service"]}), ["port"],
        ["Port 8000 on spark-1 is held by jupyter.service (" + LISTENER.strip() + "). Stop that program or set "
         "vllm_port to a free port."], id="port-held"),
    row("engine", dict(ENGINE, vllm_api_key_next="new key"), SEEN, ["api_key_next"],
        ["vllm_api_key_next on spark-1 cannot be used (its value is not shown): it must be a Bearer token (letters, "
         "digits and - . _ ~ + /, then = padding; no space or newline - ansible-vault encrypt_string with echo -n), "
         "differ from vllm_api_key, and come with vllm_api_key set (the key everything the collection runs keeps "
         "sending while the engines accept both). To put a key on a site that has none, set vllm_api_key and move the "
         "clients to it first (vLLM ignores a key it does not ask for). Nothing was changed."], ["new key", KEY],
        id="api-key-next"),
    # -- deploy.yml (no playbook_dir: a playbook is named as an installed collection runs it)
    row("deploy", dict(DEPLOY, topology="both"), {}, ["topology"],
        ["Set topology to 'replicas' or 'split' in the inventory (now 'both'), and list at least one machine in group "
         "gb10 (now 2) and one proxy host in group proxy (now 1)."], id="deploy-topology"),
    row("deploy", {"groups": {"gb10": ["a"]}, "site_engine_group": "gb10", "site_proxy_group": "proxy"}, {},
        ["topology"], ["(now ''), and list at least one machine in group gb10 (now 1) and one proxy host in group proxy "
                       "(now 0)."], id="deploy-no-proxy-no-topology"),
    row("restart", ONE, {"serving": {"reason": "rejected", "status": "dead"}}, ["api_key_rejected"],
        ["spark-1's engine rejects vllm_api_key (HTTP 401 or 403): it runs with another key. Changing the key in one "
         "step would leave clients, the proxy's membership checker and the watchdogs with a key that half the engines "
         "refuse until every one restarted. Nothing was changed. Rotate it in two runs instead (roles/vllm/README.md, "
         '"Rotating the API key"): put the old key back as vllm_api_key and the new one as vllm_api_key_next, run '
         "factory_floor.llm.deploy (the engines restart one at a time and take both keys), move the clients to the new "
         "key; then make the new key vllm_api_key, remove vllm_api_key_next and run factory_floor.llm.deploy again."],
        id="key-rejected"),
    row("restart", ONE, {"serving": {"reason": "reached", "status": "serving"}}, ["only_replica"],
        ["spark-1 is the only replica and its configuration changed (max_num_seqs 8 -> 12). Restarting it while it "
         "serves is an outage by nature: no other replica can take the requests, so the proxy answers 503 with "
         "Retry-After for one start-up (5 to 13 min on GB10). Nothing was changed. To restart it now anyway: "
         "factory_floor.llm.deploy -e vllm_restart_force=true. Or add a second machine to group gb10 first: "
         "factory_floor.llm.deploy starts it, then restarts this one while the new one serves."], id="only-replica"),
    row("restart", dict(ONE, playbook_dir="/srv/factory-floor/playbooks"), {"serving": {"status": "serving"}},
        ["only_replica"], ["To restart it now anyway: playbooks/deploy.yml -e vllm_restart_force=true. Or add a second "
                           "machine to group gb10 first: playbooks/deploy.yml starts it"], id="only-replica-checkout"),
    # -- the switch
    row("switch", {}, {}, ["switch_to"],
        ["switch_to must be 'replicas' or 'split' (got ''); use factory_floor.llm.switch_to_replicas or "
         "factory_floor.llm.switch_to_split."], id="switch-to-unset"),
    row("switch", {"playbook_dir": "/home/op/.ansible/collections/ansible_collections/factory_floor/llm/playbooks"}, {},
        ["switch_to"], ["use factory_floor.llm.switch_to_replicas or factory_floor.llm.switch_to_split."],
        id="switch-to-installed"),
    row("switch", {"playbook_dir": "/home/op/factory-floor/playbooks"}, {}, ["switch_to"],
        ["use playbooks/switch-to-replicas.yml or playbooks/switch-to-split.yml."], id="switch-to-checkout"),
    row("switch", {"switch_to": "Replicas"}, {}, ["switch_to"], ["(got 'Replicas')"], id="switch-to-case"),
    # Issue 35: the way on names every setting it takes. With tool_gate_min_score at 0 (its default) switching
    # without the incumbent's score also takes a tool_gate_min_score, or the gate has no bar and the switch
    # refuses a second time: both, with how to choose the value, in one refusal.
    row("switch_incumbent", SWITCH, {"failure": "the gate's endpoint answered 500 " + "x" * 700}, ["incumbent_score"],
        ["Could not score the tool calling of the split serving now on spark-1: the gate's endpoint answered 500... "
         "Nothing was changed. Fix that and run again. Or switch without the incumbent's score, which takes two "
         "settings: -e tool_gate_measure_incumbent=false -e tool_gate_min_score=N. tool_gate_min_score is 0 (its "
         "default), and without the incumbent's score it is the gate's only bar: at 0 the switch refuses again, since "
         "a candidate that passes a single case would pass. For N take one case below the lowest score a build you "
         "trust reaches with this suite (factory_floor.llm.tool_gate_spread runs the suite on an engine that serves it "
         "and prints that value), and keep it in the inventory (group_vars/gb10.yml)."],
        id="incumbent-not-scored-no-bar"),
    row("switch_incumbent", dict(SWITCH, tool_gate_bar={"min_score": "20.0", "tolerance": "5.0"}),
        {"failure": "Tool-calling test against http://127.0.0.1:8000 stopped: timed out"}, ["incumbent_score"],
        ["Could not score the tool calling of the split serving now on spark-1: Tool-calling test against "
         "http://127.0.0.1:8000 stopped: timed out Nothing was changed. Fix that and run again. Or switch without the "
         "incumbent's score: -e tool_gate_measure_incumbent=false; the new topology must then reach "
         "tool_gate_min_score (20) only."], ["tool_gate_min_score=N"], id="incumbent-not-scored-min-score-set"),
    # What the gate's probe (vllm_health, /v1/models with the gate's key and model; no chat completion) saw,
    # in words that name the setting: the same refusal in a dry run, which sends no load.
    row("switch_incumbent", SWITCH, {"failure": "vLLM at http://127.0.0.1:8000 rejected the api_key (HTTP 401)",
                                     "serving": {"status": "dead", "reason": "rejected", "url": "http://127.0.0.1:8000",
                                                 "error": "HTTP 401", "models": [], "failed": True}},
        ["incumbent_score"],
        ["Could not score the tool calling of the split serving now on spark-1: its engine at http://127.0.0.1:8000 "
         "rejects the key the gate sends (tool_gate_api_key, by default vllm_api_key; HTTP 401 or 403): it was "
         "started with another key. Nothing was changed. Fix that and run again. Or switch without the incumbent's "
         "score, which takes two settings: -e tool_gate_measure_incumbent=false -e tool_gate_min_score=N."],
        id="incumbent-rejects-the-key"),
    row("switch_incumbent", SWITCH, {"serving": {"status": "wrong_model", "reason": "probed", "url": "http://127.0.0.1:8000",
                                                 "error": "lab-chat is not served", "models": ["old-chat"]}},
        ["incumbent_score"],
        ["on spark-1: its engine at http://127.0.0.1:8000 does not serve the model the gate asks for "
         "(tool_gate_model, by default vllm_served_model_name): its /v1/models lists old-chat. Nothing was changed."],
        id="incumbent-serves-another-name"),
    row("switch_incumbent", SWITCH, {"serving": {"status": "unreachable", "reason": "probed", "url": "http://127.0.0.1:8000",
                                                 "error": "GET http://127.0.0.1:8000/health: connection refused"}},
        ["incumbent_score"],
        ["on spark-1: its engine at http://127.0.0.1:8000 is unreachable (GET http://127.0.0.1:8000/health: "
         "connection refused). Nothing was changed."], id="incumbent-unreachable"),
    row("switch_hosts", dict(SWITCH, vllm_switch_plan=dict(PLAN, lost_hosts=["spark-2"])), {}, ["lost_hosts"],
        ["This run does not reach every engine host of group gb10: spark-2 is not in it (--limit, or not answering). "
         "A topology switch stops and starts every engine host together. Nothing was changed. Run it without --limit "
         "(or with a --limit that includes every host of gb10 and proxy)."], id="one-host-left-out"),
    row("switch_hosts", dict(SWITCH, vllm_switch_plan=dict(PLAN, lost_hosts=["spark-1", "spark-2"])), {},
        ["lost_hosts"], ["gb10: spark-1, spark-2 are not in it"], id="two-hosts-left-out"),
    # -- the proxy's settings (issue 35): a switch leaves the proxy as it is, so it must run the inventory's
    row("switch_proxy", PROXIES, {"proxies": {"gw-1": {"deployed": True, "differences": [MODEL, API_KEY]}, "gw-2": SAME}},
        ["proxy_settings"],
        ["The proxy does not run the inventory's settings. On gw-1: nginx_proxy_model (by default "
         "vllm_served_model_name): old-chat on the proxy, lab-chat in the inventory; nginx_proxy_api_key (by default "
         "vllm_api_key): another key than the proxy's (neither is shown). A switch changes the engines only: it "
         "starts the new ones with the inventory's settings and leaves the proxy as it is, so the proxy would go on "
         "with its own next to engines that run the inventory's. Nothing was changed. nginx_proxy_model, "
         "nginx_proxy_api_key describe the engines too, and the engines that serve now run what the proxy has: "
         "applied to the proxy alone, they would take those engines out of rotation or refuse their clients. Bring "
         "the engines and the proxy "
         "to the inventory together first (ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.deploy; a new "
         'vllm_api_key the way roles/vllm/README.md, "Rotating the API key", says), or set the inventory back to what '
         "runs and change them after the switch. Then run the switch again."], [KEY], id="proxy-key-and-model"),
    row("switch_proxy", dict(PROXIES, ansible_inventory_sources=[]),
        {"proxies": {"gw-1": {"deployed": True, "differences": [INTERVAL, NGINX_CONF]},
                     "gw-2": {"deployed": True, "differences": [INTERVAL]}}},
        ["proxy_settings"],
        ["The proxy does not run the inventory's settings. On gw-1: nginx_proxy_check_interval: 1.0 on the proxy, 1.5 "
         "in the inventory; nginx.conf, its listen, proxy_read_timeout lines (nginx_proxy_* settings). On gw-2: "
         "nginx_proxy_check_interval: 1.0 on the proxy, 1.5 in the inventory. A switch changes the engines only",
         "Nothing was changed. Apply them to the proxy first (ansible-playbook -i INVENTORY factory_floor.llm.deploy "
         "--tags proxy: nginx reloads, the engines that serve now stay in rotation), then run the switch again."],
        ["describe the engines"], id="proxy-only-settings"),
    row("switch_proxy", PROXIES, {"proxies": {"gw-1": SAME, "gw-2": {"deployed": False, "differences": []}}},
        ["proxy_missing"],
        ["The proxy on gw-2 has no membership checker configuration (/etc/factory-floor/upstream.json): the proxy "
         "was never set up there. A switch puts the new engines in the proxy's rotation and needs it. Nothing was "
         "changed. Set it up first (ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.deploy --tags "
         "proxy), then run the switch again."], id="proxy-not-set-up"),
    # -- the image
    row("image", IMAGE, info(tag="latest", pinned=False), ["image"],
        ["spark-1: vllm_container_image vllm/vllm-openai:v0.32.0 is not pinned: :latest names whatever was pulled or "
         "loaded last on each host, so the inventory would not say which vLLM runs, and two hosts could serve two "
         "builds under one name. Name a tag (for example vllm/vllm-openai:v0.32.0), or keep the name and set "
         "vllm_container_image_digest: " + ID_A + " is what it names on this host now. Nothing was changed."],
        id="image-latest"),
    row("image", IMAGE, info(ref="vllm/vllm-openai", tag="", pinned=False, present=False, id=""), ["image"],
        ["is not pinned: no tag (:latest) names whatever", "set vllm_container_image_digest (sha256:..., its ID or "
         "repository digest). Nothing was changed."], id="image-untagged-absent"),
    row("image", IMAGE, info(expected_digest=ID_B, digest_matches=False, repo_digests=["vllm/vllm-openai@" + ID_A]),
        ["image"],
        ["spark-1: the vLLM image vllm/vllm-openai:v0.32.0 here is not the build vllm_container_image_digest names ("
         + ID_B + "): its ID is " + ID_A + " and its repository digests are vllm/vllm-openai@" + ID_A + ". Load or pull "
         "the build the digest names, or set vllm_container_image_digest to the one you mean to run. Nothing was "
         "changed."], id="image-digest"),
    row("image", IMAGE, info(expected_digest=ID_B, digest_matches=False), ["image"],
        ["its ID is " + ID_A + ", with no repository digest. Load"], id="image-digest-loaded"),
    row("image", IMAGE, info(architecture="amd64", architecture_matches=False), ["image"],
        ['spark-1: the vLLM image vllm/vllm-openai:v0.32.0 is built for amd64, and this host is arm64 (aarch64): its '
         'programs would die with "exec format error" when the engine starts. Load or pull the arm64 build of the '
         "image (docker pull --platform linux/arm64 ...; the GB10 builds are arm64), or set vllm_container_image to "
         "one. Nothing was changed."], id="image-architecture"),
    row("image", IMAGE, info(present=False, id="", architecture="", architecture_matches=None), ["image"],
        ["spark-1: the vLLM image vllm/vllm-openai:v0.32.0 is not on this host (/usr/bin/docker image inspect finds no "
         "such image), and vllm_container_pull is false (--pull=never), so the engine could not start. Put it there "
         "first: `docker load -i FILE` (an image built or saved elsewhere) or `docker pull vllm/vllm-openai:v0.32.0` on "
         "spark-1; or set vllm_container_pull: true to let the unit's start pull it when it is missing (--pull=missing, "
         "never at every start). Nothing was changed."], id="image-missing"),
    row("image", dict(IMAGE, vllm_container_pull=True),
        info(present=False, id="", architecture_matches=None, expected_digest=ID_B), ["image"],
        ["spark-1: the vLLM image vllm/vllm-openai:v0.32.0 is not on this host, so it cannot be checked against "
         "vllm_container_image_digest " + ID_B + " before anything changes (a pull by tag may bring another build). "
         "Pull or load it first (`docker pull vllm/vllm-openai@" + ID_B + "`), or write the digest into "
         "vllm_container_image (vllm/vllm-openai@" + ID_B + "): a pull by digest can only bring that build. Nothing "
         "was changed."], id="image-unverifiable"),
    row("image_builds", BUILDS, {"images": {"spark-1": fact(), "spark-2": fact(ID_B), "gw": fact(ID_B)}},
        ["image_builds"],
        ["vllm_container_image names different builds on different hosts: vllm/vllm-openai:v0.32.0 is spark-1 " + ID_A
         + ", spark-2 " + ID_B + ". One name must be one build on every engine host (the split's two ranks run one "
         "vLLM; replicas behind one served name serve one build). Nothing was changed. Load the same build on every "
         "host; a digest (vllm_container_image_digest, or NAME@sha256:... in vllm_container_image) then says which one "
         "is meant."], id="one-name-two-builds"),
    row("image_builds", dict(BUILDS, vllm_image_check=fact(running=RUNS_OLD)), {}, ["image_running"],
        ["spark-1's vllm-replica.service runs the image vllm/vllm-openai:v0.31.0 (" + ID_B + "), not the inventory's "
         "vllm_container_image vllm/vllm-openai:v0.32.0 (" + ID_A + "). factory_floor.llm.deploy does not change the "
         "image of a serving engine: a new vLLM is a new build, and factory_floor.llm.deploy has no tool-calling gate. "
         "Nothing was changed. The "
         "gated way: set vllm_container_image back to vllm/vllm-openai:v0.31.0 (what runs), then run "
         "factory_floor.llm.switch_model -e switch_image=vllm/vllm-openai:v0.32.0 (one replica at a time, each "
         "tool-call "
         "gated before it takes traffic, rolled back on failure), then set vllm_container_image: "
         "vllm/vllm-openai:v0.32.0. To keep what runs, set vllm_container_image: vllm/vllm-openai:v0.31.0 in the "
         "inventory. To restart on vllm/vllm-openai:v0.32.0 now, ungated: factory_floor.llm.deploy -e "
         "vllm_deploy_image_change=true (replicas one at a time while another serves)."], id="replica-runs-another-image"),
    row("image_builds", dict(BUILDS, topology="split", vllm_image_check=dict(
        fact(), running={"vllm-replica.service": {}, "vllm-split.service": RUNS_MOVED})), {}, ["image_running"],
        ["spark-1's vllm-split.service runs the image vllm/vllm-openai:v0.32.0 (" + ID_B + "), not the inventory's",
         "Nothing was changed. The name vllm/vllm-openai:v0.32.0 now names another build than the one that runs "
         "(pulled, loaded or built again since it started); what runs is " + ID_B + ", which vllm_container_image can "
         "name by that ID. The split has no gated image upgrade in place: factory_floor.llm.switch_to_replicas starts "
         "the replicas on the inventory's image and gates them before they take traffic (then "
         "factory_floor.llm.switch_to_split). To "
         "keep what runs, set vllm_container_image: " + ID_B + " in the inventory.",
         "(the split as a pair: an outage of one start-up)."], id="split-runs-a-moved-name"),
]

# What passes: (check, variables, what the host said)
PASSES = [
    pytest.param("engine", ENGINE, SEEN, id="container-defaults"),
    pytest.param("engine", dict(ENGINE, vllm_model="Qwen/Qwen3-8B"), dict(SEEN, model_dir={"skipped": True}),
                 id="model-by-name"),
    pytest.param("engine", dict(ENGINE, vllm_gpu_memory_utilization="0.74", vllm_port="8000"), SEEN,
                 id="numbers-as-strings"),
    pytest.param("engine", dict(ENGINE, vllm_container_ipc="", vllm_container_shm_size="16g",
                                vllm_container_cache_dir=""), SEEN, id="shm-size-without-ipc-host-no-cache"),
    pytest.param("engine", dict(ENGINE, vllm_container_engine="lxc", vllm_runtime="venv",
                                vllm_container_run_args=["-e", "X=1"]), dict(VENV_SEEN), id="venv-ignores-container"),
    pytest.param("engine", dict(ENGINE, vllm_env={"A": "it's", "B": "$HOME and ${x}", "C": "a#b ;c", "D": 5}), SEEN,
                 id="env-read-as-written"),
    pytest.param("engine", ENGINE, dict(SEEN, port_listeners={"rc": 0, "stdout": LISTENER},
                                        port_units={"rc": 0, "stdout_lines": ["vllm-replica.service "]}),
                 id="port-held-by-our-unit"),
    pytest.param("engine", ENGINE, dict(SEEN, port_listeners={"rc": 0, "stdout": LISTENER},
                                        units_active={"rc": 0, "stdout_lines": ["active", "inactive"]},
                                        port_units={"skipped": True}), id="port-ours-while-a-unit-runs"),
    pytest.param("engine", dict(VENV, vllm_tool_call_parser="qwen9"),
                 dict(VENV_SEEN, tool_parsers={"rc": 1, "stdout_lines": []}), id="parsers-not-listed"),
    pytest.param("engine", dict(ENGINE, vllm_api_key_next="k2/new+Key_~.9="), SEEN, id="api-key-rotation"),
    pytest.param("deploy", DEPLOY, {}, id="deploy"),
    pytest.param("restart", dict(ONE, vllm_restart_force="true"), {"serving": {"reason": "reached", "status": "serving"}},
                 id="only-replica-forced"),
    pytest.param("restart", dict(ONE, groups=DEPLOY["groups"]), {"serving": {"reason": "reached", "status": "serving"}},
                 id="another-replica-carries"),
    pytest.param("restart", ONE, {"serving": {"reason": "probed", "status": "loading"}}, id="only-replica-not-serving"),
    pytest.param("restart", dict(ONE, inventory_hostname="gw", vllm_service_plan=None), {"serving": {"skipped": True}},
                 id="proxy-host"),
    pytest.param("switch", {"switch_to": "split"}, {}, id="switch-to-split"),
    pytest.param("switch_hosts", SWITCH, {}, id="every-host-in-the-run"),
    pytest.param("switch_proxy", PROXIES, {"proxies": {"gw-1": SAME, "gw-2": SAME}}, id="proxies-as-the-inventory"),
    pytest.param("switch_proxy", PROXIES, {"proxies": {"gw-1": SAME}}, id="a-proxy-not-read-is-not-judged"),
    # Settings a switch can go on with (check timings, timeouts): named in a note, not refused.
    pytest.param("switch_proxy", PROXIES, {"proxies": {"gw-1": {"deployed": True, "differences": [INTERVAL]},
                                                       "gw-2": SAME}}, id="proxy-settings-that-do-not-block"),
    pytest.param("image", IMAGE, info(), id="image"),
    pytest.param("image", dict(IMAGE, vllm_container_pull="yes"), info(present=False, id="", architecture_matches=None),
                 id="image-pulled-at-start"),
    pytest.param("image", dict(IMAGE, vllm_container_pull=True),
                 info(ref="vllm/vllm-openai@" + ID_B, present=False, expected_digest=ID_B), id="image-pulled-by-digest"),
    pytest.param("image", dict(IMAGE, vllm_runtime="venv"), {"image_info": {"skipped": True}}, id="venv-no-image"),
    pytest.param("image_builds", BUILDS, {"images": {"spark-1": fact(), "spark-2": fact(), "gw": fact(ID_B)}},
                 id="one-build-on-the-play-hosts"),
    pytest.param("image_builds", BUILDS, {"images": {"spark-1": fact(), "spark-2": {}}}, id="venv-host"),
    pytest.param("image_builds", dict(BUILDS, vllm_image_check=fact(running=RUNS_OLD), vllm_deploy_image_change=True),
                 {}, id="image-change-allowed"),
    pytest.param("image_builds", dict(BUILDS, vllm_image_check=fact(running=RUNS_OLD), vllm_image_check_running=False),
                 {}, id="running-not-compared"),
    pytest.param("image_builds", dict(BUILDS, vllm_image_check=fact(running=dict(RUNS_OLD, image_id=ID_A))), {},
                 id="runs-the-inventory-build"),
]


def _one_line(text):
    return " ".join(text.split())


def _produced():
    """Every message the REFUSED rows produce."""
    return [error["message"] for param in REFUSED for error in vc.check(*param.values[:3])]


@pytest.mark.parametrize("check, variables, observed, refused, words, never", REFUSED)
def test_each_refusal(check, variables, observed, refused, words, never):
    errors = vc.check(check, variables, observed)
    assert [error["check"] for error in errors] == refused
    message = vc.format_errors(errors)
    for word in words:
        assert word in message, word
    for secret in tuple(never) + (SECRET, KEY):
        assert secret not in message and secret not in repr(errors), secret


@pytest.mark.parametrize("check, variables, observed", PASSES)
def test_what_passes(check, variables, observed):
    assert vc.check(check, variables, observed) == []


def _pattern(template):
    """A message template of the fixture as a regex: each {{ ... }} any text, whitespace any whitespace."""
    parts = re.split(r"\{\{.*?\}\}|\{%.*?%\}", template, flags=re.S)
    return "(?:.*?)".join(r"\s+".join(re.escape(word) for word in part.split(" ")) if part.strip() else
                          (r"\s*" if part else "") for part in parts)


def _fixture():
    with open(FIXTURE, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("old", _fixture()["messages"], ids=lambda old: old["task"])
def test_every_message_of_the_tasks_is_still_produced(old):
    pattern = re.compile(_pattern(_one_line(old["text"])) + r"\Z", re.S)
    assert any(pattern.match(_one_line(message)) for message in _produced()), old["text"]


@pytest.mark.parametrize("old", _fixture()["items"], ids=lambda old: "%s %s" % (old["where"], old["text"][:40]))
def test_every_sentence_of_the_tasks_is_still_produced(old):
    pattern = re.compile(_pattern(_one_line(old["text"])), re.S)
    assert any(pattern.search(_one_line(message)) for message in _produced()), old["text"]


def test_no_row_produces_a_message_the_tasks_did_not_have():
    patterns = [re.compile(_pattern(_one_line(old["text"])) + r"\Z", re.S) for old in _fixture()["messages"]]
    for message in _produced():
        assert any(pattern.match(_one_line(message)) for pattern in patterns), message


@pytest.mark.parametrize("differences, note", [
    ([INTERVAL, dict(NGINX_CONF, blocks=False, directives=["proxy_read_timeout"])],
     "The proxy runs other settings than the inventory's, which a switch leaves as they are. On gw-1: "
     "nginx_proxy_check_interval: 1.0 on the proxy, 1.5 in the inventory; nginx.conf, its proxy_read_timeout lines "
     "(nginx_proxy_* settings). None of them keeps the new engines out of rotation; apply them when you choose: "
     "ansible-playbook -i /srv/ff/inventory/site factory_floor.llm.deploy --tags proxy (nginx reloads, the engines "
     "that serve stay in rotation)."),
    ([], None),
    # A refusal says it all: no note beside it.
    ([INTERVAL, MODEL], None),
], ids=["named", "nothing-differs", "refused"])
def test_the_proxy_settings_a_switch_goes_on_with_are_named(differences, note):
    observed = {"proxies": {"gw-1": {"deployed": True, "differences": differences}, "gw-2": SAME}}
    assert vc.notes("switch_proxy", PROXIES, observed) == ([note] if note else [])
    assert vc.notes("switch_hosts", PROXIES, observed) == []


def test_every_problem_is_reported_at_once_numbered():
    variables = dict(ENGINE, vllm_port=0, vllm_max_num_seqs=0, vllm_api_key_next="bad key")
    errors = vc.check("engine", variables, dict(SEEN, model_dir={"stat": {"exists": False}}))
    assert [error["check"] for error in errors] == ["settings", "model_dir", "api_key_next"]
    assert errors[0]["message"].startswith("vLLM settings on spark-1 are not valid: vllm_port=0 (1-65535); "
                                           "vllm_max_num_seqs=0 (>= 1). Fix")
    assert errors[0]["variables"] == ["vllm_port", "vllm_max_num_seqs"]
    lines = vc.format_errors(errors).splitlines()
    assert [line[:3] for line in lines] == ["1) ", "2) ", "3) "]


def test_an_unknown_check_is_an_error():
    with pytest.raises(ValueError, match="check must be one of engine, deploy"):
        vc.check("layout", {}, {})


@pytest.mark.parametrize("text, expected", [
    ("short", "short"),
    ("a" * 605, "a" * 605),
    ("word " * 200, ("word " * 200)[:597].rsplit(" ", 1)[0] + "..."),
])
def test_truncate_is_jinjas(text, expected):
    import jinja2  # pylint: disable=import-outside-toplevel
    assert vc.truncate(text) == expected == jinja2.Environment().from_string("{{ t | truncate(600) }}").render(t=text)


def test_the_role_vars_no_longer_hold_the_tables():
    with open(os.path.join(ROOT, "roles", "vllm", "vars", "main.yml"), encoding="utf-8") as handle:
        text = handle.read()
    assert "_vllm_container_managed_args" not in text and "_vllm_kv_cache_dtypes" not in text


def test_every_variable_read_is_the_roles():
    """The variables the checks read are declared by a role (argument_specs, vars) or are Ansible's own."""
    declared = set()
    for role in os.listdir(os.path.join(ROOT, "roles")):
        for parts in (("meta", "argument_specs.yml"), ("vars", "main.yml"), ("defaults", "main.yml")):
            path = os.path.join(ROOT, "roles", role, *parts)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as handle:
                    document = yaml.safe_load(handle) or {}
                if parts[0] == "meta":
                    for spec in (document.get("argument_specs") or {}).values():
                        declared.update((spec.get("options") or {}).keys())
                else:
                    declared.update(document)
    ansible = {"inventory_hostname", "groups", "ansible_play_hosts", "ansible_facts.architecture", "playbook_dir",
               "ansible_inventory_sources"}
    # Set by the roles' own tasks (set_fact), documented in the vllm role's argument specs' descriptions.
    facts = {"vllm_service_plan", "vllm_switch_plan", "vllm_image_check",
             # The tool_gate role's gated and incumbent entry points (the gate's bar; roles/tool_gate/README.md).
             "tool_gate_bar"}
    for check, names in vc.VARIABLES.items():
        for name in names:
            assert name in declared | ansible | facts, (check, name)
