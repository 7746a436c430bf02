# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""factory_floor.llm.maintenance_note: add one step's note to what this host noted during a switch or an upgrade (the
fact ``maintenance_window_host``), reading that fact, ``inventory_hostname`` and, in a rescue,
``ansible_failed_result`` from the host's variables itself. The decision is
``plugins/module_utils/_maintenance_window.py``'s ``host_note``; the documentation ``plugins/modules/maintenance_note.py``."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.factory_floor.llm.plugins.module_utils import _maintenance_window as mw

FACT = mw.NOTES

ARGUMENT_SPEC = dict(
    events=dict(type="list", elements="str", default=[]),
    at=dict(type="float"),
    after=dict(type="dict"),
    note=dict(type="dict", default={}),
    failure=dict(type="str", choices=list(mw.FAILURES)),
    message=dict(type="str", default="step failed"),
    restored=dict(type="dict"),
)


class ActionModule(ActionBase):
    """Returns the notes as ansible_facts; every reader takes them from ``ansible_facts`` (``notes_of``), where a
    set_fact or play variable of the same name cannot hide them (tests/unit/roles/test_maintenance_note_action.py)."""

    _supports_check_mode = True
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        # An unknown failure is refused by the argument spec above (its choices), naming the kinds to use.
        notes = mw.host_note(mw.notes_of(task_vars) or {}, str(task_vars.get("inventory_hostname", "")),
                             note=args["note"], events=args["events"], at=args["at"], after=args["after"],
                             failure=args["failure"],
                             failed=task_vars.get("ansible_failed_result") or {}, message=args["message"],
                             restored=args["restored"])
        return dict(result, changed=False, ansible_facts={FACT: notes})
