# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""What a starting vLLM engine is doing, read from its own log lines; one progress line of a start-up wait.

Pure logic, standard library only. The patterns are vLLM 0.32.0's own messages (the
format string and the file that logs it are quoted next to each); a journal line
carries prefixes (``(Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:563] ...``,
a container's or the journal's own), which the patterns ignore. tqdm progress bars
(``Loading safetensors checkpoint shards: 50% Completed | 1/2 [...]``, ``Capturing CUDA
graphs (decode, FULL): 40%|...| 14/35 [...]``) reach the journal as lines that start with
``\\r``; only the text after the last ``\\r`` of a line counts.

The phase of a start is the phase of the **last** line that names one: a start-up goes
through them in order (starting, configuring, engine core, loading weights, model loaded,
compiling, KV cache, CUDA graphs, API server, ready), and a line seen again later (a
second compile range, the KV cache size logged after the graphs) keeps the latest one.
"""

from __future__ import annotations

import re

_NUM = r"([0-9]+(?:\.[0-9]+)?)"

# name, words for people, and the patterns that put a start in that phase. A pattern's
# groups give the detail (see _detail).
PHASES = (
    ("starting", "starting", (
        # entrypoints/serve/utils/api_utils.py: "non-default args: %s"
        re.compile(r"non-default args: "),
        # entrypoints/serve/utils/api_utils.py (log_version_and_model): "vLLM server version %s, serving model %s",
        # or with a formatter the logo, whose second line ends "version %s"
        re.compile(r"vLLM server version (\S+), serving model "),
        re.compile(r"\u2588\s+version (\S+)$"),
        # entrypoints/cli/serve.py: "Launching vLLM (v%s) headless multiproc executor, with head node address %s ..."
        re.compile(r"Launching vLLM \(v([^)]+)\) headless multiproc executor"),
    )),
    ("configuring", "reading the model's configuration", (
        # config/model.py: "Resolved architecture: %s"
        re.compile(r"Resolved architecture: (\S+)"),
        # config/model.py: "Using max model len %s"
        re.compile(r"Using max model len ([0-9]+)"),
    )),
    ("engine", "starting the engine core", (
        # v1/engine/core.py: "Initializing a V1 LLM engine (v%s) with config: %s"
        re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\) with config"),
        # v1/engine/utils.py: "Waiting for %d local, %d remote core engine proc(s) to start."
        re.compile(r"Waiting for ([0-9]+) local, ([0-9]+) remote core engine proc\(s\) to (?:start|connect)"),
    )),
    ("loading", "loading weights", (
        # v1/worker/gpu_model_runner.py, v1/worker/cpu_model_runner.py: "Starting to load model %s..."
        re.compile(r"Starting to load model (\S+?)(?:\.\.\.)?$"),
        # model_executor/model_loader/weight_utils.py: tqdm desc "Loading safetensors checkpoint shards"
        # (and the other loaders' "Loading safetensors using ... loader"); tqdm: "n/N"
        re.compile(r"Loading safetensors (?:checkpoint shards|using [^:]+):\s+[0-9]+% Completed \| ([0-9]+)/([0-9]+)"),
        # model_executor/model_loader/default_loader.py: "Loading weights took %.2f seconds"
        re.compile(r"Loading weights took " + _NUM + r" seconds"),
    )),
    ("loaded", "model loaded", (
        # v1/worker/gpu_model_runner.py: "Model loading took %s GiB memory and %.6f seconds"
        re.compile(r"Model loading took " + _NUM + r" GiB memory and " + _NUM + r" seconds"),
    )),
    ("compiling", "compiling (torch.compile and warm-up)", (
        # compilation/monitor.py: "%sStarting torch.compile"
        re.compile(r"Starting torch\.compile"),
        # compilation/backends.py: "%sDynamo bytecode transform time: %.2f s"
        re.compile(r"Dynamo bytecode transform time: " + _NUM + r" s"),
        # compilation/backends.py: "%sCompiling a graph for compile range %s takes %.2f s"
        re.compile(r"Compiling a graph for compile range (.+) takes " + _NUM + r" s"),
        # compilation/backends.py: "%sDirectly load the compiled graph(s) for compile range %s from the cache, took %.3f s"
        re.compile(r"Directly load the compiled graph\(s\) for compile range (.+) from the cache, took " + _NUM + r" s"),
        # compilation/monitor.py: "%storch.compile took %.2f s in total"
        re.compile(r"torch\.compile took " + _NUM + r" s in total"),
        # v1/worker/cpu_model_runner.py: "Warming up model for the compilation..." and "Warming up done."
        re.compile(r"Warming up model for the compilation"),
        re.compile(r"Warming up done\."),
        # v1/worker/gpu_worker.py: "Compile and warming up model for size %d"
        re.compile(r"Compile and warming up model for size ([0-9]+)"),
        # compilation/monitor.py: "%sInitial profiling/warmup run took %.2f s"
        re.compile(r"Initial profiling/warmup run took " + _NUM + r" s"),
    )),
    ("kv_cache", "sizing the KV cache", (
        # v1/worker/gpu_model_runner.py: "Estimated CUDA graph memory: %.2f GiB total"
        re.compile(r"Estimated CUDA graph memory: (-?" + _NUM[1:] + r" GiB total"),
        # v1/worker/gpu_worker.py: "Available KV cache memory: %s GiB"
        re.compile(r"Available KV cache memory: " + _NUM + r" GiB"),
        # v1/worker/cpu_worker.py: "Explicitly set (%s/%s) GiB for KV cache on node %d." / "Auto set (%s/%s) GiB ..."
        re.compile(r"(?:Explicitly|Auto) set \(" + _NUM + r"/" + _NUM + r"\) GiB for KV cache"),
        # v1/core/kv_cache_utils.py: "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
        re.compile(r"[A-Z]+(?: \+ host)? KV cache size: ([0-9][0-9,]*) tokens"),
    )),
    ("graphs", "capturing CUDA graphs", (
        # v1/worker/gpu_model_runner.py: tqdm desc "Capturing CUDA graphs ({decode|mixed prefill-decode}, {mode})"; "n/N"
        re.compile(r"Capturing CUDA graphs \(([^)]*)\):\s*[0-9]+%.*?\| ?([0-9]+)/([0-9]+)"),
        # v1/worker/gpu_model_runner.py: "Graph capturing finished in %.0f secs, took %.2f GiB"
        re.compile(r"Graph capturing finished in ([0-9]+) secs, took " + _NUM + r" GiB"),
    )),
    ("api", "starting the API server", (
        # v1/engine/core.py: "init engine (profile, create kv cache, warmup model) took %.2f s ..."
        re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _NUM + r" s"),
        # entrypoints/launchers/api_server/entry.py: "Supported tasks: %s", "Starting vLLM server on %s"
        re.compile(r"Supported tasks: "),
        re.compile(r"Starting vLLM server on (\S+)"),
        # entrypoints/launchers/launcher.py: "Available routes are:"; uvicorn: "Waiting for application startup."
        re.compile(r"Available routes are:"),
        re.compile(r"Waiting for application startup\."),
    )),
    ("ready", "ready", (
        # uvicorn (vLLM's HTTP server): "Application startup complete."
        re.compile(r"Application startup complete\."),
    )),
    ("stopping", "shutting down", (
        # entrypoints/launchers/launcher.py, v1/engine/core.py: "[shutdown] API server: shutdown triggered", ...
        re.compile(r"\[shutdown\] "),
    )),
)

NAMES = tuple(name for name, _label, _patterns in PHASES)
LABELS = dict((name, label) for name, label, _patterns in PHASES)

# A Python exception's last line, as a traceback ends ("ValueError: No available memory
# for the cache blocks."), after vLLM's prefix when it logged the traceback itself.
_EXCEPTION = re.compile(r"(?:^|\] |\s)((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Exit)): (\S.*)$")
# vLLM's own words for a start that failed (v1/engine/core.py: "EngineCore failed to start.").
_FAILED = re.compile(r"EngineCore failed to start\.")
# What a log line says, without vLLM's prefix ("(EngineCore pid=88) INFO 12-01 23:57:17 [core.py:402] ").
_PREFIX = re.compile(r"^(?:\([^)]*\)\s+)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[0-9-]+\s+[0-9:.]+\s+\[[^\]]*\]\s+)?")
# vLLM's timestamp of a log line ("INFO 12-01 23:57:17 [").
_STAMP = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ([0-9]{2}-[0-9]{2} [0-9:]{8})")
# Longest vLLM line kept in a result, in characters.
LINE_CHARS = 240


def _text(line):
    """A journal line as vLLM meant it: the last tqdm update of a line, no trailing blanks."""
    return str(line).rsplit("\r", maxsplit=1)[-1].rstrip()


def message(line):
    """A log line without vLLM's prefix, cut to :data:`LINE_CHARS`."""
    text = _PREFIX.sub("", _text(line).strip(), count=1)
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 3] + "..."


def _detail(name, pattern_index, groups):
    """Short words for what a phase line's figures say (empty when it has none)."""
    if name == "starting" and groups:
        return "vLLM %s" % groups[0]
    if name == "configuring":
        return ("%s" if pattern_index == 0 else "max model len %s") % groups[0]
    if name == "engine" and pattern_index == 0:
        return "vLLM %s" % groups[0]
    if name == "engine":
        return "waiting for %s local and %s remote engine processes" % groups
    if name == "loading" and pattern_index == 0:
        return "model %s" % groups[0]
    if name == "loading" and pattern_index == 1:
        return "%s/%s shards" % groups
    if name == "loading" and pattern_index == 2:
        return "took %s s" % groups[0]
    if name == "loaded":
        return "%s GiB in %s s" % (groups[0], _seconds(groups[1]))
    if name == "compiling" and pattern_index in (1, 4, 8) and groups:
        return "%s s" % groups[0]
    if name == "compiling" and pattern_index in (2, 3):
        return "compile range %s, %s s" % groups
    if name == "compiling" and pattern_index == 7:
        return "size %s" % groups[0]
    if name == "kv_cache" and pattern_index == 0:
        return "CUDA graph estimate %s GiB" % groups[0]
    if name == "kv_cache" and pattern_index == 1:
        return "%s GiB" % groups[0]
    if name == "kv_cache" and pattern_index == 2:
        return "%s of %s GiB" % groups
    if name == "kv_cache" and pattern_index == 3:
        return "%s tokens" % groups[0]
    if name == "graphs" and pattern_index == 0:
        return "%s %s/%s" % groups
    if name == "graphs" and pattern_index == 1:
        return "finished in %s s, %s GiB" % groups
    if name == "api" and pattern_index == 0:
        return "engine ready after %s s" % groups[0]
    if name == "api" and pattern_index == 2:
        return "on %s" % groups[0]
    return ""


def _seconds(text):
    try:
        return "%.1f" % float(text)
    except ValueError:
        return text


def _match(text):
    """(phase name, pattern index, groups) of a line that names a phase, or None."""
    for name, _label, patterns in PHASES:
        for index, pattern in enumerate(patterns):
            found = pattern.search(text)
            if found:
                return name, index, found.groups()
    return None


def parse(lines):
    """What a start's log says the engine is doing, and why it failed if it did.

    ``lines`` are the log lines of one start (a unit's journal since its current run
    began), oldest first. Returns a dict:

    - ``phase``: the name (one of :data:`NAMES`) of the last line that names a phase,
      or None when none does yet;
    - ``label``: words for people (``loading weights``), ``detail``: what that line's
      figures say (``1/2 shards``, ``40.2 GiB in 21.5 s``), empty when none;
    - ``line``: vLLM's own words (:func:`message`), ``at``: vLLM's timestamp of that
      line (``12-01 23:57:14``, None for a tqdm line, which has none);
    - ``seen``: every phase name met, in the order first met;
    - ``cause``: the first Python exception line of the start (the root cause; vLLM
      logs the worker's before the engine core's and the API server's), or vLLM's
      ``EngineCore failed to start.``; None when there is none;
    - ``failed_in``: the phase the start was in when that line came (None without one).
    """
    result = {"phase": None, "label": "", "detail": "", "line": None, "at": None, "seen": [], "cause": None,
              "failed_in": None}
    failed_line = None
    for raw in lines or ():
        text = _text(raw)
        if not text.strip():
            continue
        found = _match(text)
        if found is not None:
            name, index, groups = found
            stamp = _STAMP.search(text)
            result.update(phase=name, label=LABELS[name], detail=_detail(name, index, groups), line=message(text),
                          at=stamp.group(1) if stamp else None)
            if name not in result["seen"]:
                result["seen"].append(name)
        if result["cause"] is None:
            exception = _EXCEPTION.search(text)
            if exception:
                result["cause"] = message("%s: %s" % exception.groups())
                result["failed_in"] = result["phase"]
        if failed_line is None and _FAILED.search(text):
            failed_line = (message(text), result["phase"])
    if result["cause"] is None and failed_line is not None:
        result["cause"], result["failed_in"] = failed_line
    return result


def describe(parsed):
    """The phase in a few words (``loading weights (1/2 shards)``), or ``no vLLM log line yet``."""
    if not parsed or not parsed.get("phase"):
        return "no vLLM log line yet"
    return parsed["label"] + (" (%s)" % parsed["detail"] if parsed.get("detail") else "")


def duration(seconds):
    """``45s``, ``2m05s``, ``1h02m`` for people."""
    seconds = max(0, int(round(seconds or 0)))
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm" % (seconds // 60) if seconds % 60 == 0 else "%dm%02ds" % divmod(seconds, 60)
    return "%dh" % (seconds // 3600) if seconds % 3600 == 0 else "%dh%02dm" % (seconds // 3600, (seconds % 3600) // 60)


def unit_words(unit):
    """``vllm-replica.service activating (start), 1 crash`` from a unit state dict (or None)."""
    if not unit:
        return ""
    words = "%s %s" % (unit.get("name") or "unit", unit.get("active_state") or "?")
    if unit.get("sub_state"):
        words += " (%s)" % unit["sub_state"]
    return words


def progress_line(elapsed, timeout, status, unit=None, parsed=None, crashes=0, error=None):
    """One line of a start-up wait, for people: time, the unit, what vLLM is doing.

    ``2m30s of 30m: vllm-replica.service activating (start); vLLM: loading weights (1/2 shards)
    [12-01 23:57:14]; API: loading``. ``elapsed`` and ``timeout`` are seconds, ``status``
    vllm_health's last status, ``unit`` a unit state dict (``name``, ``active_state``,
    ``sub_state``), ``parsed`` :func:`parse`'s result, ``crashes`` the unit's runs that
    ended since the wait began; ``error`` is the last probe's error, shown when there is
    no unit to say more.
    """
    parts = ["%s of %s" % (duration(elapsed), duration(timeout))]
    if unit:
        parts.append(unit_words(unit) + (", %d crash%s since the wait began" % (crashes, "" if crashes == 1 else "es")
                                         if crashes else ""))
    if unit or parsed:
        vllm = "vLLM: " + describe(parsed)
        if parsed and parsed.get("at"):
            vllm += " [%s]" % parsed["at"]
        if parsed and parsed.get("cause"):
            vllm += "; error%s: %s" % (" while " + LABELS[parsed["failed_in"]] if parsed.get("failed_in") else "",
                                       parsed["cause"])
        parts.append(vllm)
    api = "API: %s" % status
    if error and not unit:
        api += " (%s)" % error
    parts.append(api)
    return parts[0] + ": " + "; ".join(parts[1:])
