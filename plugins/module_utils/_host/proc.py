# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What ``/proc`` says of a process tree: CPU seconds and stopped processes. Standard library only.

Private to the collection; the daemons' roles install it next to ``_host/watchdog.py`` (which
counts an engine's CPU as work done, ``cpu_progress``) and next to ``_host/systemd.py`` (a unit's
processes, :func:`stat_table` the one reader of ``/proc/PID/stat``).
"""

from __future__ import annotations

import math
import os


def stat_table(proc: str = "/proc") -> dict | None:
    """``{pid: (comm, fields)}`` of every process under ``proc``, from ``/proc/PID/stat``.

    ``comm`` is the command name (field 2); ``fields`` are the fields after it, so
    ``fields[0]`` is field 3 (the state), ``fields[1]`` the parent PID, ``fields[11]`` and
    ``fields[12]`` utime and stime (clock ticks), ``fields[36]`` the core it last ran on.
    Processes that vanish while being read are left out; None when ``proc`` cannot be listed.
    """
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    table = {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces: split after it.
        table[int(name)] = (text[text.find("(") + 1:text.rfind(")")], text[text.rfind(")") + 2:].split())
    return table


def engine_cpu(root_pid: int, proc: str = "/proc") -> tuple:
    """CPU seconds (user + system) used by the processes under ``root_pid``, and which of them are stopped.

    Returns ``(seconds, stopped)``: ``seconds`` is None when ``root_pid`` is not
    there; ``stopped`` lists the descendants in state T or t (SIGSTOP, a tracer)
    as ``"NAME pid PID"``. ``root_pid`` is vLLM's API server - the unit's main
    process, or with the container runtime the container's main process
    (:meth:`Watchdog.engine_root`) - and is left out: it keeps answering /health
    and /metrics (and using CPU) while its engine hangs. Its descendants are the engine core
    (``VLLM::EngineCore``) and the workers (``VLLM::Worker``; a headless split rank
    runs workers only). All of them count: during one long step the engine core
    waits for its workers without using CPU while the workers compute. A worker also
    keeps polling shared memory (using CPU) for the next step of an engine core that
    is stopped, so the caller must not take CPU as progress while ``stopped`` is not
    empty (:meth:`Counters.worked_since`). Read from ``/proc/PID/stat`` (field 3 the
    state, fields 14 and 15 the CPU time in clock ticks).
    """
    if not root_pid:
        return None, []
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parents, used, names_of, states = {}, {}, {}, {}
    for pid, (comm, fields) in (stat_table(proc) or {}).items():
        try:
            names_of[pid] = comm
            states[pid] = fields[0]
            parents[pid] = int(fields[1])
            used[pid] = (int(fields[11]) + int(fields[12])) / float(ticks)
        except (IndexError, ValueError):
            continue
    if root_pid not in used:
        return None, []
    tree, todo = set(), [root_pid]
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        if pid in tree:
            continue
        tree.add(pid)
        todo.extend(children.get(pid, []))
    tree.discard(root_pid)
    stopped = ["%s pid %d" % (names_of.get(pid, "?"), pid) for pid in sorted(tree) if states.get(pid) in ("T", "t")]
    return round(math.fsum(used[pid] for pid in tree if pid in used), 2), stopped
