# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.engine_status: the reads of an engine host's status, each kept as a task with
``failed_when: false`` registers it (a read that fails is its failure, the others go on).

On the host, in this order: ``systemctl show`` of the engine units (also in check mode: it only reads), the
topology record (``topology_record``), whether the engine serves (``vllm_health``, probe ``models``, once), what
each engine unit's process was started with (``vllm_engine_info``) and, with the container runtime, the engines'
containers (``container_image_info``). The documentation is ``plugins/modules/engine_status.py``.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

# systemctl show's properties that factory_floor.llm.site_status reads (_site_status.parse_units).
PROPERTIES = "Id,LoadState,ActiveState,SubState,Result,UnitFileState,NRestarts"

ARGUMENT_SPEC = dict(
    units=dict(type="list", elements="str", required=True),
    topology=dict(type="str", required=True),
    record_path=dict(type="path", required=True),
    inventory_sources=dict(type="list", elements="str", default=[]),
    playbook_dir=dict(type="str", default=""),
    endpoint=dict(type="dict", required=True),
    runtime=dict(type="str", required=True),
    container_engine=dict(type="str", default="docker"),
    containers=dict(type="list", elements="str", default=[]),
)


def as_registered(result, item=None):
    """``result`` as a task with ``failed_when: false`` registers it (a loop's item with ``item``)."""
    result = dict(result or {})
    result.pop("invocation", None)
    if "exception" in result:
        result["failed_when_suppressed_exception"] = result.pop("exception")
    result.setdefault("changed", False)
    result.update(failed=False, failed_when_result=False)
    if item is not None:
        result.update(item=item, ansible_loop_var="item")
    return result


class ActionModule(ActionBase):
    """Runs the reads on the host; documented as factory_floor.llm.engine_status."""

    _supports_check_mode = True

    def _read(self, task_vars, module, args, in_check_mode_too=False):
        saved = self._task.check_mode
        if in_check_mode_too:
            self._task.check_mode = False
        try:
            return self._execute_module(module_name=module, module_args=args, task_vars=task_vars)
        finally:
            self._task.check_mode = saved

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        args = plain(args)
        try:
            units = self._read(task_vars, "ansible.legacy.command",
                               {"argv": ["systemctl", "show", "-p", PROPERTIES, "--"] + args["units"]}, True)
            record = self._read(task_vars, "factory_floor.llm.topology_record", {
                "path": args["record_path"], "topology": args["topology"],
                "inventory_sources": args["inventory_sources"], "playbook_dir": args["playbook_dir"]})
            # Any model (the view reports what it serves); once, as the proxy's membership checker asks.
            endpoint = {key: value for key, value in args["endpoint"].items() if key in ("url", "api_key") and value}
            health = self._read(task_vars, "factory_floor.llm.vllm_health", dict(endpoint, probe="models", timeout=0))
            engine = [as_registered(self._read(task_vars, "factory_floor.llm.vllm_engine_info", {"unit": unit}), unit)
                      for unit in args["units"]]
            containers = {}
            if args["runtime"] == "container":
                containers = self._read(task_vars, "factory_floor.llm.container_image_info", {
                    "engine": args["container_engine"], "containers": args["containers"]}).get("containers") or {}
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)  # as the normal action plugin does
        result.update(changed=False, runtime=args["runtime"], units=as_registered(units).get("stdout") or "",
                      record=as_registered(record), health=as_registered(health), engine=engine,
                      containers=containers)
        return result
