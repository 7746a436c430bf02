# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The re-run of an interrupted run: every unit the collection manages is reloaded and (re)started onto what is
on disk, though this run changes no file (issue 33, items 16 and 18).

Each case is the situation a run finds after one that wrote the files and stopped before ``systemctl
daemon-reload`` or the restart: every file task reports "not changed", systemd says ``NeedDaemonReload=yes``
and ``factory_floor.llm.systemd_unit_info`` names the unit for a restart. The role's own task (found by its
module and what it does, not by its name) is evaluated with Ansible's templating, as a run would.
"""

from __future__ import annotations

import os

import pytest
import yaml

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.factory_floor.llm.plugins.module_utils import _engine_service as es

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SYSTEMD = "ansible.builtin.systemd_service"

UNCHANGED = {"changed": False, "skipped": False, "failed": False}
SKIPPED = {"changed": False, "skipped": True}
CHANGED = {"changed": True, "skipped": False, "failed": False}


def stale(unit):
    """What systemd_unit_info returns for a unit an interrupted run left on its old files."""
    return dict(UNCHANGED, need_daemon_reload=True, restart=[unit])


def tasks(path):
    """Every task of a task file, blocks flattened."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        pending = list(yaml.safe_load(handle))
    found = []
    while pending:
        task = pending.pop(0)
        pending[:0] = task.get("block", []) + task.get("rescue", []) + task.get("always", [])
        found.append(task)
    return found


def systemd_task(path, **wanted):
    """The one systemd_service task of ``path`` whose arguments hold ``wanted`` (values compared as written)."""
    matches = [task for task in tasks(path)
               if SYSTEMD in task and all(str(task[SYSTEMD].get(key)) == str(value) for key, value in wanted.items())]
    assert len(matches) == 1, (path, wanted, [task.get("name") for task in matches])
    return matches[0]


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def with_task_vars(task, variables):
    """The variables a task sees: the play's, then its own ``vars:`` (templates, resolved when used)."""
    return dict(variables, **{name: _trusted(value) for name, value in task.get("vars", {}).items()})


def evaluate(expression, variables):
    templar = Templar(loader=DataLoader(), variables=variables)
    if isinstance(expression, bool):
        return expression
    text = expression if "{{" in str(expression) else "{{ %s }}" % expression
    return templar.template(trust_as_template(text))


def argument(task, name, variables):
    """The task's ``ansible.builtin.systemd_service`` argument ``name`` as Ansible evaluates it."""
    return evaluate(task[SYSTEMD][name], with_task_vars(task, variables))


def runs(task, variables):
    """Whether the task runs: every ``when:`` condition true."""
    conditions, variables = task.get("when", []), with_task_vars(task, variables)
    return all(boolean(evaluate(condition, variables)) for condition in
               (conditions if isinstance(conditions, list) else [conditions]))


def common(**extra):
    values = {"ansible_check_mode": False}
    values.update(extra)
    return values


# --------------------------------------------------------------------------- item 18: the engines


ENGINE = common(vllm_service_name="vllm-replica.service", vllm_service_state="started", vllm_service_restart=True,
                vllm_service_plan={"restart_pending": True}, __vllm_unit_file=UNCHANGED, __vllm_env_file=UNCHANGED,
                __vllm_plan=dict(UNCHANGED, need_daemon_reload=True, fingerprint="f"), __vllm_argv=["vllm", "serve"])


def engine_service(variables):
    """The arguments of service_run's factory_floor.llm.engine_service task, evaluated as a run would."""
    (task,) = [task for task in tasks("roles/vllm/tasks/service_run.yml") if "factory_floor.llm.engine_service" in task]
    variables = with_task_vars(task, variables)
    return {name: evaluate(value, variables) for name, value in task["factory_floor.llm.engine_service"].items()}


def engine_steps(variables):
    """The systemd_service steps engine_service runs for them (plugins/module_utils/_engine_service.py)."""
    args = engine_service(variables)
    return dict(es.steps(args["state"], args["unit"], args["plan"]["restart_pending"], boolean(args["restart"]),
                         boolean(args["reload"])))


def test_the_restart_of_an_engine_reloads_the_unit_systemd_had_not_read():
    # The lab: the unit said --max-num-seqs 10, systemd still had 12, the restart ran 12 again.
    steps = engine_steps(ENGINE)
    assert steps["restart"] == {"name": "vllm-replica.service", "state": "restarted", "enabled": True,
                                "daemon_reload": True}


def test_a_start_reloads_too_when_no_restart_did():
    steps = engine_steps(dict(ENGINE, vllm_service_restart=False))
    assert "restart" not in steps and steps["start"]["daemon_reload"] is True


def test_a_staged_unit_systemd_had_not_read_is_read():
    assert engine_steps(dict(ENGINE, vllm_service_state="present")) == {"reload": {"daemon_reload": True}}


def test_a_restarted_engine_is_checked_against_the_rendered_configuration():
    # The same check as the service_check entry point, shared with the switch's cut-over (test_vllm_cut_over.py).
    (engine_info,) = [task for task in tasks("roles/vllm/tasks/service_check.yml") if "factory_floor.llm.vllm_engine_info" in task]
    assert engine_info["factory_floor.llm.vllm_engine_info"]["require_match"] is True
    assert engine_info["factory_floor.llm.vllm_engine_info"]["argv"] == "{{ __vllm_argv }}"
    assert engine_info["factory_floor.llm.vllm_engine_info"]["fingerprint"] == "{{ __vllm_plan.fingerprint }}"
    assert not runs(engine_info, dict(ENGINE, ansible_check_mode=True))
    args = engine_service(ENGINE)
    assert args["argv"] == ["vllm", "serve"] and args["fingerprint"] == "f"
    assert es.checks("started", False, {"restart": CHANGED, "start": UNCHANGED})
    assert es.checks("started", False, {"start": CHANGED})
    assert not es.checks("started", False, {"start": UNCHANGED})
    assert not es.checks("started", True, {"restart": CHANGED})


# --------------------------------------------------------------------------- item 16: the daemons


# The memory guard's and keepalived's watches, the vLLM watchdog and the proxy's membership checker:
# factory_floor.llm.daemon_service (test_daemon_service.py holds its rule; below, what the checker's task gives it).


def test_the_checker_is_restarted_on_its_code_configuration_and_unit():
    (task,) = [task for task in tasks("roles/nginx_proxy/tasks/run.yml") if "factory_floor.llm.daemon_service" in task]
    args = task["factory_floor.llm.daemon_service"]
    values = common(_nginx_proxy_checker_unit="factory-floor-upstream.service", _nginx_proxy_config_dir="/etc/ff",
                    _site_host_files=["/opt/ff/_host/upstream.py"], __site_host_programs=UNCHANGED,
                    __nginx_proxy_checker_config=CHANGED, __nginx_proxy_checker_unit_file=UNCHANGED)
    assert evaluate(args["unit"], values) == "factory-floor-upstream.service"
    assert evaluate(args["files"], values) == ["/etc/systemd/system/factory-floor-upstream.service",
                                               "/etc/ff/upstream.json", "/opt/ff/_host/upstream.py"]
    assert boolean(evaluate(args["changed"], values)) and not boolean(evaluate(args["unit_changed"], values))
    values.update(__nginx_proxy_checker_config=UNCHANGED, __nginx_proxy_checker_unit_file=CHANGED)
    assert not boolean(evaluate(args["changed"], values)) and boolean(evaluate(args["unit_changed"], values))


DAEMON = "factory_floor.llm.daemon_service"


def firewall_load(**values):
    """The firewall's daemon_service arguments as Ansible evaluates them (its rule: test_daemon_service.py)."""
    (task,) = [task for task in tasks("roles/vllm/tasks/firewall.yml") if DAEMON in task]
    variables = common(_vllm_config_dir="/etc/factory-floor", **dict(
        {"__vllm_firewall_rules": UNCHANGED, "__vllm_firewall_unit": UNCHANGED, "__vllm_firewall_table": {"rc": 0}},
        **values))

    def value_of(value):
        return evaluate(value, variables) if "{{" in value else value

    return {key: value_of(value) if isinstance(value, str) else [value_of(item) for item in value]
            for key, value in task[DAEMON].items()}


def test_the_firewall_rules_an_interrupted_run_wrote_are_loaded():
    # daemon_service asks systemd_unit_info about the rules and the unit: reloaded, restarted when not on them.
    args = firewall_load()
    assert args["unit"] == "factory-floor-firewall.service"
    assert args["files"] == ["/etc/factory-floor/firewall.nft", "/etc/systemd/system/factory-floor-firewall.service"]
    assert not boolean(args["changed"]) and not boolean(args["unit_changed"])
    assert boolean(firewall_load(__vllm_firewall_rules=CHANGED)["changed"])
    assert boolean(firewall_load(__vllm_firewall_unit=CHANGED)["unit_changed"])


def test_a_firewall_table_flushed_under_an_active_unit_is_loaded_again():
    # `systemctl start nftables` on a running host flushes the ruleset; the unit stays active.
    (read,) = [t for t in tasks("roles/vllm/tasks/firewall.yml") if "ansible.builtin.command" in t
               and t["ansible.builtin.command"]["argv"] == ["nft", "list", "table", "inet", "factory_floor"]]
    assert read["register"] == "__vllm_firewall_table" and read["check_mode"] is False
    assert boolean(firewall_load(__vllm_firewall_table={"rc": 1})["changed"])


def test_the_leave_unit_is_reloaded_never_restarted():
    leave = systemd_task("roles/vllm/tasks/firewall.yml", name="factory-floor-engine-leave.service")
    assert leave[SYSTEMD]["state"] == "started"
    assert boolean(argument(leave, "daemon_reload", common(
        __vllm_leave_unit=UNCHANGED, __vllm_leave_unit_info=stale("factory-floor-engine-leave.service"))))


# systemd_reload reads NeedDaemonReload itself and never restarts (its rule: test_systemd_reload.py).
RELOAD = "factory_floor.llm.systemd_reload"


def reload_task(path):
    (task,) = [task for task in tasks(path) if RELOAD in task]
    return task


@pytest.mark.parametrize("path, unit, dropin", [
    # Restart=always in a drop-in systemd never read: a master that exits stays dead (issue 33, item 1).
    ("roles/nginx_proxy/tasks/run.yml", "nginx.service", "__nginx_proxy_dropin_file"),
    ("roles/keepalived/tasks/run.yml", "keepalived.service", "__keepalived_dropin_file"),
])
def test_nginx_and_keepalived_read_the_drop_in_an_interrupted_run_wrote_and_are_never_restarted(path, unit, dropin):
    task = reload_task(path)
    assert task[RELOAD]["units"] == [unit] and task[RELOAD]["start"] is True
    assert boolean(evaluate(task[RELOAD]["reload"], common(**{dropin: CHANGED})))
    assert not boolean(evaluate(task[RELOAD]["reload"], common(**{dropin: UNCHANGED})))
    # Never a restart for it: Restart= applies to the running process once systemd has read it.
    assert not [task for task in tasks(path) if SYSTEMD in task and task[SYSTEMD].get("name") == unit]
    assert not [task for task in tasks(path) if INFO in task]


def test_the_memory_guard_reloads_the_drop_ins_an_interrupted_run_wrote():
    # Workload and engine drop-ins notify a handler; a run interrupted before it ran left systemd on the old ones.
    task = reload_task("roles/memory_guard/tasks/main.yml")
    assert "start" not in task[RELOAD] and "reload" not in task[RELOAD]
    assert runs(task, common(memory_guard_enabled=True)) and not runs(task, common(memory_guard_enabled=False))
    assert not [task for task in tasks("roles/memory_guard/tasks/main.yml") if SYSTEMD in task]


# --------------------------------------------------------------------------- what each role asks about

INFO = "factory_floor.llm.systemd_unit_info"


def info_tasks(path):
    return [task for task in tasks(path) if INFO in task]


def asked(task, variables):
    """The units and files a systemd_unit_info task asks about, as Ansible evaluates them."""
    variables = with_task_vars(task, variables)
    return ({key: evaluate(value, variables) if isinstance(value, str) else [evaluate(item, variables) for item in value]
             for key, value in task[INFO].items()})


# The host programs' package as the site role names its files (roles/site/vars/main.yml, _site_host_files).
PACKAGE = ["/usr/local/lib/factory-floor/_host/__init__.py", "/usr/local/lib/factory-floor/_host/watchdog.py"]


def test_the_memory_guard_asks_about_the_slice_every_workload_and_the_engines():
    task = reload_task("roles/memory_guard/tasks/main.yml")
    variables = common(memory_guard_slice="factory-floor-workloads.slice",
                       _memory_guard_unit_workloads=[{"name": "db", "unit": "postgresql.service"}],
                       _memory_guard_slice_workloads=[{"name": "builds", "slice": "factory-floor-workloads-builds.slice"}],
                       memory_guard_engine_units=["vllm-replica.service", "vllm-split.service"])
    args = {"units": evaluate(task[RELOAD]["units"], with_task_vars(task, variables))}
    assert args == {"units": ["factory-floor-workloads.slice", "postgresql.service", "factory-floor-workloads-builds.slice",
                              "vllm-replica.service", "vllm-split.service"]}
