# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a running vLLM engine was started with, against what would be started now. Pure logic.

The engine's unit runs ``vllm serve`` (directly, or as a container's entrypoint); its
process carries ``FACTORY_FLOOR_CONFIG=<fingerprint>`` in its environment (the vllm
role's fingerprint of the command line, environment and API key). Reading these from
``/proc`` is the vllm_engine_info module's; this compares them.
"""

from __future__ import annotations

FINGERPRINT_VARIABLE = "FACTORY_FLOOR_CONFIG"


def serve_args(words, keep_empty: bool = False) -> list:
    """vLLM's arguments after ``serve`` as the model, then one ``--flag value`` item per flag.

    What comes before ``serve`` differs between the two (a script's interpreter leads a
    running process's command line), so it is left out; without ``serve`` the whole
    command line counts.
    """
    text = " ".join(word for word in words if word or keep_empty)
    if not text:
        return []   # nothing rendered (a read without argv): nothing wanted
    after = text.split(" serve ", 1)[-1]
    parts = after.split(" --")
    return parts[:1] + ["--" + part for part in parts[1:]]


def arg_diff(now: list, new: list) -> tuple:
    """(removed, added): the items of the running command line not wanted, and the wanted ones not running."""
    return [item for item in now if item not in new], [item for item in new if item not in now]


def split_nul(data: bytes) -> list:
    """``/proc/PID/cmdline`` or ``environ`` as its strings."""
    return data.decode("utf-8", errors="replace").split("\0")


def fingerprint_matches(environ: list, fingerprint: str) -> bool:
    """Whether the process was started with this configuration fingerprint."""
    return "%s=%s" % (FINGERPRINT_VARIABLE, fingerprint) in environ


def compare(cmdline: list | None, environ: list | None, argv: list, fingerprint: str | None) -> dict:
    """What runs (``cmdline``/``environ`` of its main process, None when nothing runs) against ``argv``."""
    running = cmdline is not None
    if not running:
        return {"running": False, "config_differs": False, "args_now": [], "args_new": serve_args(argv, keep_empty=True),
                "args_removed": [], "args_added": []}
    # A process's command line ends with a NUL (an empty last string); the rendered one is as given.
    now, new = serve_args(cmdline), serve_args(argv, keep_empty=True)
    removed, added = arg_diff(now, new)
    return {
        "running": True,
        "config_differs": fingerprint is not None and not fingerprint_matches(environ or [], fingerprint),
        "args_now": now,
        "args_new": new,
        "args_removed": removed,
        "args_added": added,
    }


def runs_rendered(result: dict) -> bool:
    """Whether a :func:`compare` result says the process runs the rendered configuration: its fingerprint and its
    arguments. True when nothing runs: there is no process to judge (a start that failed is the health wait's)."""
    return not result["running"] or not (result["config_differs"] or result["args_removed"] or result["args_added"])


def not_rendered_message(unit: str, result: dict, need_daemon_reload: bool) -> str:
    """What to say when a unit just (re)started runs another configuration than the one rendered for it."""
    what = []
    if result["args_removed"] or result["args_added"]:
        what.append("its vLLM arguments differ (runs %s; rendered %s)" % (
            " ".join(result["args_removed"]) or "-", " ".join(result["args_added"]) or "-"))
    if result["config_differs"]:
        what.append("its configuration fingerprint (%s) is not the rendered one (the command line, the environment"
                    " or the API key differ)" % FINGERPRINT_VARIABLE)
    why = ("It ran the unit file systemd had loaded before (NeedDaemonReload=yes): run systemctl daemon-reload, then"
           " restart it" if need_daemon_reload else
           "The unit file systemd runs is the rendered one, so something else sets its command line or environment"
           " (a drop-in in %s.d/, a unit of the same name earlier in systemd's search path: systemctl cat %s)"
           % (unit, unit))
    return "%s was just started, and it does not run the configuration rendered for it: %s. %s." % (
        unit, "; ".join(what), why)
