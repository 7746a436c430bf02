# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.tool_gate_note, on the controller: the tool_gate role's facts and sentences.

The task names what to note; this plugin reads the role's variables itself, as the task sees them (its defaults,
the registered run ``__tool_gate_run``, the stored score ``__tool_gate_found``), and returns the fact's ``value``
and its sentence as ``message``. The role notes the value with ``set_fact``: a fact an action plugin returned
(``ansible_facts``) would rank below an earlier ``set_fact`` of the same name. The logic is
``plugins/module_utils/_tool_gate_notes.py``'s and ``_tool_gate_verdict.py``'s; the documentation is
``plugins/modules/tool_gate_note.py``'s.
"""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_notes as tn
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_gate_verdict as tv
from ansible_collections.factory_floor.llm.plugins.plugin_utils._variables import plain

NOTES = ("not_gated", "not_measured", "measured", "incumbent", "verdict", "spread")
ARGUMENT_SPEC = dict(note=dict(type="str", required=True, choices=list(NOTES)))


def note(name, var):
    """``(value, message)`` of the note ``name``, the role's variables read with ``var(name[, default])``."""
    host, topology, topologies = var("inventory_hostname"), var("tool_gate_topology"), var("tool_gate_topologies")
    gated = boolean(var("_tool_gate_topology_gated"), strict=False)
    if name == "not_gated":
        result = tn.not_gated(topology, topologies, host)
        return result, result["message"]
    build = var("tool_gate_build")
    if name == "not_measured":
        return None, tn.not_measured(
            build["id"], var("tool_gate_model_path"), topology, topologies, gated, int(var("_tool_gate_id_chars")))
    if name == "measured":
        return tn.measured(var("__tool_gate_run")), ""
    if name == "incumbent":
        return tn.incumbent(build["id"], var("tool_gate_model_path"), topology, var("__tool_gate_found", None)), ""
    if name == "spread":
        message, fact = tn.spread(host, build["id"], var("tool_gate_model_path"), var("tool_gate_concurrency"),
                                  var("__tool_gate_run"))
        return fact, message
    try:
        result = tv.verdict(
            run=var("__tool_gate_run"), found=var("__tool_gate_found", None), host=host, url=var("tool_gate_url"),
            build_id=build["id"], model_path=var("tool_gate_model_path"), topology=topology,
            min_score=var("tool_gate_min_score"), tolerance=var("tool_gate_tolerance"),
            incumbent_build_id=var("tool_gate_incumbent_build_id"), record_file=var("_tool_gate_record_file"),
            failed_dir=var("_tool_gate_failed_dir"), now=datetime.datetime.now(datetime.timezone.utc),
            id_chars=int(var("_tool_gate_id_chars")))
    except ValueError as error:
        raise AnsibleActionFail("tool_gate_verdict: %s" % error) from None
    return result, result["message"]


class ActionModule(ActionBase):
    """Notes on the controller; its documentation is the module factory_floor.llm.tool_gate_note's."""

    _supports_check_mode = True
    _requires_connection = False
    TRANSFERS_FILES = False

    def _variable(self, name, default=...):
        try:
            return plain(self._templar.resolve_variable_expression(name))
        except AnsibleUndefinedVariable as error:
            if default is ...:
                raise AnsibleActionFail("tool_gate_note reads %s, which is not defined here: %s" % (name, error)) from error
            return default

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        value, message = note(args["note"], self._variable)
        result.update(changed=False, value=value, message=message)
        return result
