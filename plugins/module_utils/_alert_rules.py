# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's alert rules with a site's windows and thresholds.

``extras/prometheus/factory-floor-alerts.yml`` holds the rules with their default windows
(``for:``) and thresholds; :func:`apply` returns a copy with a site's own, and without the
groups of daemons the site does not run. Pure: the parsed rules file in, a new one out; every
setting is checked first, and a wrong one is a :class:`RuleSettingError` that names the
variable, the alert and what to write instead. Used by the ``alert_rules`` filter (the
``monitoring`` role). Standard library only.

An alert's threshold is the number its expression ends with, after its last comparison
(``vllm:num_requests_waiting > 12``): only such an alert takes one.
"""

from __future__ import annotations

import copy
import difflib
import math
import re

# Prometheus' duration: units from largest to smallest, each at most once (model/time.ParseDuration).
DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
# The number an expression ends with, after its last comparison operator (and an optional "bool").
THRESHOLD = re.compile(r"(?s)^(?P<head>.*(?:==|!=|>=|<=|>|<)\s*(?:bool\s+)?)(?P<number>[0-9][0-9.eE+-]*)(?P<tail>\s*)$")

VAR_FOR = "monitoring_alert_for"
VAR_THRESHOLDS = "monitoring_alert_thresholds"
VAR_SKIP = "monitoring_skip_groups"


class RuleSettingError(ValueError):
    """A setting the rules cannot take; the message names the variable and what to write."""


def _closest(name, known):
    """`` (did you mean X?)`` for the known name ``name`` is a shortening of, else the closest one, else ""."""
    longer = sorted(k for k in known if k and str(k).startswith(str(name)))
    near = longer[:1] or difflib.get_close_matches(str(name), sorted(k for k in known if k), n=1)
    return " (did you mean %s?)" % near[0] if near else ""


def is_duration(value):
    """Whether ``value`` is a Prometheus duration (``30s``, ``5m``, ``1h30m``; not ``0`` nor ``5 minutes``)."""
    return isinstance(value, str) and bool(value) and bool(DURATION.match(value))


def threshold(expr):
    """The number ``expr`` ends with after its last comparison, or None when it ends otherwise."""
    found = THRESHOLD.match(str(expr))
    return float(found.group("number")) if found else None


def _number_text(value):
    number = float(value)
    return repr(int(number)) if number.is_integer() and abs(number) < 2 ** 53 else repr(number)


def alerts(rules):
    """``{alert name: rule}`` of a parsed rules file."""
    return {rule["alert"]: rule for group in rules.get("groups") or [] for rule in group.get("rules") or []
            if "alert" in rule}


def _number(value):
    """``value`` as a finite number (a numeric string too: ``-e name=5`` gives one), or None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def check_named(named):
    """Raises RuleSettingError for the first of ``named`` (``{variable: value}``, a role's named duration settings such
    as ``monitoring_out_of_rotation_for``) that is not a Prometheus duration, naming that variable."""
    for variable, value in (named or {}).items():
        if not is_duration(value):
            raise RuleSettingError("%s is '%s': a Prometheus duration, such as 30m, 1h or 1h30m." % (variable, value))


def apply(rules, durations=None, thresholds=None, skip_groups=None, named=None):
    """A copy of ``rules`` (a parsed rules file) with ``durations`` (``{alert: duration}``, its ``for:``),
    ``thresholds`` (``{alert: number}``, the number its expression ends with) and without the groups
    named in ``skip_groups``. Raises RuleSettingError, naming every wrong setting, before changing anything;
    first the ``named`` duration variables (:func:`check_named`), on their own."""
    check_named(named)
    durations, thresholds, skip_groups = durations or {}, thresholds or {}, skip_groups or []
    if not isinstance(skip_groups, (list, tuple)):
        raise RuleSettingError("%s must be a list of rule group names, not %r" % (VAR_SKIP, skip_groups))
    if not isinstance(rules, dict) or not isinstance(rules.get("groups"), list):
        raise RuleSettingError("the alert rules must be a rules file: a mapping with a list of groups")
    known = alerts(rules)
    groups = [group.get("name") for group in rules["groups"]]
    problems = []
    for variable, settings in ((VAR_FOR, durations), (VAR_THRESHOLDS, thresholds)):
        if not isinstance(settings, dict):
            raise RuleSettingError("%s must be a mapping of alert names to values, not %r" % (variable, settings))
        for name, value in settings.items():
            said = "%s[%s]" % (variable, name)
            if name not in known:
                problems.append("%s: there is no alert %s%s." % (said, name, _closest(name, known)))
            elif variable == VAR_FOR and not is_duration(value):
                problems.append("%s is %r: a Prometheus duration, such as 30s, 5m or 1h30m." % (said, value))
            elif variable == VAR_THRESHOLDS:
                if threshold(known[name]["expr"]) is None:
                    problems.append("%s: the expression of %s ends with no number to set (it takes no threshold)."
                                    % (said, name))
                elif _number(value) is None:
                    problems.append("%s is %r: a number, such as 12 or 2.5." % (said, value))
    for name in skip_groups:
        if name not in groups:
            problems.append("%s: there is no rule group %s%s." % (VAR_SKIP, name, _closest(name, groups)))
    if problems:
        raise RuleSettingError(" ".join(problems))
    out = copy.deepcopy(rules)
    out["groups"] = [group for group in out["groups"] if group.get("name") not in skip_groups]
    for name, rule in alerts(out).items():
        if name in durations:
            rule["for"] = durations[name]
        if name in thresholds:
            found = THRESHOLD.match(rule["expr"])
            rule["expr"] = found.group("head") + _number_text(_number(thresholds[name])) + found.group("tail")
    return out
