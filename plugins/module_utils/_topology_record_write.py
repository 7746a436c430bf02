# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Writing a host's topology record, behind ``factory_floor.llm.topology_record_write``: whether it is written and
what it holds.

Written only when it changes, so a ``deploy.yml`` re-run changes nothing: when the host does not agree with the
topology recorded (``factory_floor.llm.topology_record``'s ``state``), when a model is given that the record does not
name (``model_state``), or always when told (a switch, which records the topology it ends on). Pure logic, standard
library only; the vllm role's ``topology_record`` tasks before.
"""

from __future__ import annotations

# The record's fields, in the order the file has always held them, each read from vllm_topology_record_<field>.
FIELDS = ("topology", "since", "by", "playbook", "run", "note", "model")
# A group move's (issue 37, _group_record.FIELDS): written after FIELDS when vllm_topology_record_grouping is given.
GROUP_FIELDS = ("grouping", "group", "rank")
# Those a caller may leave undefined, and what they then are.
OPTIONAL = {"by": "", "run": "", "note": "", "model": "", "always": False, "grouping": None, "group": None,
            "rank": None}


def _truthy(value):
    """Ansible's ``bool`` filter."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on", "y", "t")


def _seconds(value):
    """Jinja's ``float`` filter: 0.0 for what is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def writes(record, always=False, model=""):
    """Whether the record is written: always when told, else when the host does not agree with it (``record``: the
    read's result) or a ``model`` is given that it does not name."""
    record = record or {}
    return (_truthy(always) or record.get("state") != "agrees"
            or (len(model or "") > 0 and record.get("model_state") != "agrees"))


def content(values):
    """The record: ``values`` (field -> value of vllm_topology_record_<field>) in the file's order, ``since`` seconds
    since the epoch (a float); with a ``grouping`` (a group move's), ``grouping``, ``group`` and ``rank`` after them."""
    record = {field: values.get(field, OPTIONAL.get(field, "")) for field in FIELDS}
    record["since"] = _seconds(record["since"])
    if values.get("grouping"):
        # A group move's record: the site's grouping, this host's group and its rank in it (_group_record).
        record.update(grouping=values["grouping"], group=values.get("group") or [], rank=int(values.get("rank") or 0))
    return record
