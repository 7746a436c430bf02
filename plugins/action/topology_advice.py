# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.topology_advice, on the controller: the topology advisor's store of measurements and its ranking.

It reads the engine group, each engine host's tool gate build id (``tool_gate_build``) and ``vllm_max_model_len`` from
``hostvars`` itself, and reads and writes the store on the controller; it never connects to a host. The logic is
``plugins/module_utils/_advisor_store.py``'s and ``_topology_advisor.py``'s; the documentation is
``plugins/modules/topology_advice.py``'s.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from ansible.errors import AnsibleActionFail

from ansible_collections.factory_floor.llm.plugins.module_utils import _advisor_store as st
from ansible_collections.factory_floor.llm.plugins.module_utils import _topology_advisor as ta
from ansible_collections.factory_floor.llm.plugins.plugin_utils._task_variables import TaskVariablesAction
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

ARGUMENT_SPEC = dict(
    state=dict(type="str", required=True, choices=["profile", "read", "plan", "pending", "record", "rank"]),
    store_dir=dict(type="path"),
    current=dict(type="str"),
    grouping=dict(type="str"),
    run=dict(type="str", default=""),
    profile=dict(type="dict"),
    measured_load=dict(type="dict"),
    busiest_hour=dict(type="dict"),
    switch_report=dict(type="dict"),
    kv_tokens=dict(type="list", elements="raw"),
    switch_report_file=dict(type="path"),
    remeasure=dict(type="bool", default=False),
    start=dict(type="str"),
    apply=dict(type="bool", default=False),
    margin=dict(type="float", default=ta.DEFAULT_MARGIN),
)
NEEDS = {"profile": ("profile",), "read": (), "plan": ("current",), "pending": ("grouping", "switch_report_file"),
         "record": ("grouping", "measured_load"), "rank": ("current",)}
RESULTS = "results.json"
PROFILE = "profile.json"
ADVICE = "advice.json"


def write(path, content, check_mode=False):
    """Write ``content`` at ``path`` (its directory made when missing); whether it changed."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            if handle.read() == content:
                return False
    if check_mode:
        return True
    os.makedirs(os.path.dirname(path) or ".", mode=0o755, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path) or ".")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(content)
    os.chmod(temp, 0o644)
    os.replace(temp, path)
    return True


def _kv_tokens(values):
    """Each group's KV cache in tokens as its engine reported it (``vllm_metrics``' ``kv_cache_capacity_tokens``),
    None when any engine did not report it (the row then shows no capacity rather than a wrong smallest group)."""
    if not values:
        return None
    try:
        tokens = [int(value) for value in values]
    except (TypeError, ValueError):
        return None
    return tokens if all(token > 0 for token in tokens) else None


def read_json(path):
    """The JSON at ``path``, or None when there is no such file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None


class ActionModule(TaskVariablesAction):
    """Reads and writes the advisor's store on the controller; its documentation is the module's."""

    _supports_check_mode = True  # check mode writes nothing and says whether it would

    def store_dir(self):
        """``workload_store_dir`` as the task sees it, else ``~/.factory_floor/workload/<the inventory directory's
        name>`` (one store per site) of the user running ansible-playbook."""
        configured = self.variable("workload_store_dir", None)
        if configured:
            return os.path.expanduser(str(configured))
        site = os.path.basename(os.path.normpath(str(self.variable("inventory_dir", None) or "default")))
        return os.path.join(os.path.expanduser("~"), ".factory_floor", "workload", site)

    def proxy_url(self):
        """``workload_replay_url``, else the proxy as the probe client reaches it from this proxy host: https to the
        name its certificate carries (``nginx_proxy_tls_certificate``), else its loopback; ``site_proxy_port``."""
        configured = self.variable("workload_replay_url", None)
        if configured:
            return str(configured)
        port = self.variable("site_proxy_port", 8080)
        if self.variable("nginx_proxy_tls_certificate", None):
            name = self.variable("nginx_proxy_tls_server_name", None) or self.variable("inventory_hostname")
            return "https://%s:%s/v1" % (name, port)
        return "http://127.0.0.1:%s/v1" % port

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        state = args["state"]
        missing = [name for name in NEEDS[state] if args[name] is None]
        if missing:
            raise AnsibleActionFail("topology_advice state=%s needs %s" % (state, ", ".join(missing)))
        store_dir = args["store_dir"] or self.store_dir()
        check = bool(self._task.check_mode)
        result.update(changed=False, store_dir=store_dir)
        hosts = list((self.variable("groups", None) or {}).get(self.variable("site_engine_group", "gb10")) or [])
        hostvars = task_vars.get("hostvars") or {}
        # Only the names read below are templated (hostvars template each variable when it is read).
        first = hostvars[hosts[0]] if hosts and hosts[0] in hostvars else {}
        try:
            if state == "profile":
                text = json.dumps(plain(args["profile"]), indent=2, sort_keys=True, allow_nan=False) + "\n"
                path = os.path.join(store_dir, PROFILE)
                result.update(changed=write(path, text, check), path=path,
                              lines=st.profile_lines(plain(args["profile"])))
                return result
            if state == "read":
                path = os.path.join(store_dir, PROFILE)
                profile = read_json(path)
                if profile is None:
                    raise st.StoreError("no workload profile at %s: run workload_profile.yml first (or set "
                                        "workload_store_dir to the directory that holds one)" % path)
                # What the replay asks for: the name the engines serve the model under, and their context bound.
                result.update(profile=profile, max_model_len=plain(first.get("vllm_max_model_len")),
                              model=plain(first.get("vllm_served_model_name") or first.get("vllm_model")),
                              url=self.proxy_url(), ca_path=self.variable("nginx_proxy_tls_ca_file", None) or None)
                return result
            path = os.path.join(store_dir, RESULTS)
            try:
                with open(path, encoding="utf-8") as handle:
                    results = st.read(handle.read(), path)
            except FileNotFoundError:
                results = []
            build = st.site_build({h: (plain(hostvars[h].get("tool_gate_build")) or {}).get("id") if h in hostvars
                                   else None for h in hosts})
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            # The group sizes the model's heads allow (the layout check's; unknown, every size).
            heads = (self.variable("site_engine_groups_num_attention_heads", None),
                     self.variable("site_engine_groups_num_key_value_heads", None))
            if state == "plan":
                plan = st.plan(st.settle(results, read_json), build, args["current"], len(hosts), args["remeasure"],
                               heads)
                # The window's run id, and where its switch to the other grouping saves its report.
                run = args["run"] or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                plan.update(run=run, switch_report_file=os.path.join(store_dir, "switch-%s-%s.json" % (
                    run, plan["other"] or "none")))
                result["plan"] = plan
                return result
            if state in ("pending", "record"):
                if state == "pending":
                    new = st.pending(results, args["grouping"], build, args["run"], args["switch_report_file"], at)
                else:
                    new = st.measured(results, args["grouping"], build, args["run"], at, plain(args["measured_load"]),
                                      plain(args["busiest_hour"]), plain(args["switch_report"]),
                                      kv_tokens=_kv_tokens(plain(args["kv_tokens"])))
                    result["lines"] = st.replay_lines(args["grouping"] + " at the measured load",
                                                      args["measured_load"])
                    if args["busiest_hour"]:
                        result["lines"] += st.replay_lines(args["grouping"] + " at the busiest hour",
                                                           args["busiest_hour"])
                result.update(changed=write(path, st.dump(new), check), path=path, build=build)
                return result
            settled = st.settle(results, read_json)
            profile = read_json(os.path.join(store_dir, PROFILE))
            max_model_len = plain(first.get("vllm_max_model_len"))
            advice = st.advise(settled, profile, build, args["current"], len(hosts),
                               int(max_model_len) if max_model_len else None, args["margin"], heads)
            # Where a window ends: the grouping it started on, or with apply the one recommended.
            recommended = advice["recommendation"]["grouping"]
            return_to = recommended if args["apply"] and recommended else (args["start"] or args["current"])
            result.update(return_to=return_to, switch_back=return_to != args["current"])
            text = json.dumps(advice, indent=2, sort_keys=True, allow_nan=False) + "\n"
            recommendation = ["recommendation: %s" % (recommended or "none")]
            reasons = ["  " + reason for reason in advice["recommendation"]["reasons"]]
            result.update(advice=advice, changed=write(os.path.join(store_dir, ADVICE), text, check),
                          path=os.path.join(store_dir, ADVICE), lines=advice["lines"] + recommendation + reasons)
        except (st.StoreError, ta.AdvisorError) as error:
            result.update(failed=True, msg="topology_advice %s: %s" % (state, error))
        except OSError as error:
            result.update(failed=True, msg="topology_advice %s: the store in %s: %s" % (state, store_dir, error))
        return result
