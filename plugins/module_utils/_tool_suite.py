# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Tool-calling suites: reading, merging and checking them, the requests they make, BFCL data.

Private to the collection; the suite layer of ``factory_floor.llm.tool_call_test``
(``_tool_check`` holds the rules a reply must pass, ``_tool_call`` runs and scores).
Pure, standard library only (PyYAML for a suite file in YAML).
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re

from ansible_collections.factory_floor.llm.plugins.module_utils._tool_check import (
    TOOL_CHOICES,
    SchemaError,
    SuiteError,
    check_expected,
    check_schema,
)


# ---------------------------------------------------------------------------
# Suites
# ---------------------------------------------------------------------------

def load_suite_file(path: str):
    """Read a suite from a JSON or YAML file (YAML needs PyYAML where this runs)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise SuiteError("could not read the suite file %s: %s" % (path, exc)) from exc
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SuiteError("%s is not valid JSON: %s" % (path, exc)) from exc
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise SuiteError("%s is YAML, and PyYAML is not installed on this host; give the suite as JSON, "
                         "or as data (the tool_gate role reads it on the controller)" % path) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SuiteError("%s is not valid YAML: %s" % (path, exc)) from exc


def merge_suites(suites: list) -> dict:
    """Merge suites in order: tools by name (a later one may not redefine a name), cases appended."""
    merged = {"name": [], "tools": {}, "cases": []}
    for index, suite in enumerate(suites):
        if not isinstance(suite, dict):
            raise SuiteError("suite %d: expected a mapping with tools and cases, got %s" % (index, type(suite).__name__))
        unknown = set(suite) - {"name", "description", "tools", "cases"}
        if unknown:
            raise SuiteError("suite %d: unknown keys %s (a suite has name, description, tools, cases)" % (
                index, ", ".join(sorted(unknown))))
        merged["name"].append(str(suite.get("name") or "suite%d" % index))
        tools = suite.get("tools") or {}
        if not isinstance(tools, dict):
            raise SuiteError("suite %s: tools must be a mapping of tool name to definition" % merged["name"][-1])
        for name, tool in tools.items():
            if name in merged["tools"] and merged["tools"][name] != tool:
                raise SuiteError("tool %r is defined twice, differently (suite %s)" % (name, merged["name"][-1]))
            merged["tools"][name] = tool
        cases = suite.get("cases") or []
        if not isinstance(cases, list):
            raise SuiteError("suite %s: cases must be a list" % merged["name"][-1])
        merged["cases"].extend(cases)
    merged["name"] = "+".join(merged["name"])
    validate_suite(merged)
    return merged


def _tool_definition(name, tool, where):
    if not isinstance(tool, dict):
        raise SuiteError("%s: a tool is a mapping with description and parameters" % where)
    unknown = set(tool) - {"name", "description", "parameters", "strict"}
    if unknown:
        raise SuiteError("%s: unknown keys %s" % (where, ", ".join(sorted(unknown))))
    if not re.match(r"^[A-Za-z0-9_-]{1,64}$", name or ""):
        raise SuiteError("%s: tool name %r must be 1-64 letters, digits, _ or - (OpenAI's rule)" % (where, name))
    parameters = tool.get("parameters", {"type": "object", "properties": {}})
    try:
        check_schema(parameters, "%s.parameters" % where)
    except SchemaError as exc:
        raise SuiteError(str(exc)) from exc
    return {"name": name, "description": tool.get("description", ""), "parameters": parameters}


def case_tools(case: dict, tools: dict) -> list:
    """The tool definitions a case offers: names from the suite's tools, or inline definitions."""
    result = []
    for entry in case.get("tools") or []:
        if isinstance(entry, str):
            if entry not in tools:
                raise SuiteError("case %s: tool %r is not defined in the suite's tools" % (case.get("id"), entry))
            result.append(_tool_definition(entry, tools[entry], "tool %s" % entry))
        elif isinstance(entry, dict):
            result.append(_tool_definition(entry.get("name"), entry, "case %s inline tool" % case.get("id")))
        else:
            raise SuiteError("case %s: tools lists names or tool definitions" % case.get("id"))
    names = [tool["name"] for tool in result]
    if len(set(names)) != len(names):
        raise SuiteError("case %s offers a tool twice" % case.get("id"))
    return result


def validate_suite(suite: dict) -> None:
    """Raise :class:`SuiteError` naming the first thing wrong with a merged suite."""
    for name, tool in suite["tools"].items():
        _tool_definition(name, tool, "tool %s" % name)
    seen = set()
    for index, case in enumerate(suite["cases"]):
        where = "case %d" % index
        if not isinstance(case, dict):
            raise SuiteError("%s: a case is a mapping" % where)
        unknown = set(case) - {"id", "category", "description", "messages", "prompt", "tools", "tool_choice",
                               "expect", "max_tokens"}
        if unknown:
            raise SuiteError("%s: unknown keys %s" % (where, ", ".join(sorted(unknown))))
        case_id = case.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise SuiteError("%s: id (a string) is required" % where)
        where = "case %s" % case_id
        if case_id in seen:
            raise SuiteError("%s: the id is used twice" % where)
        seen.add(case_id)
        if not isinstance(case.get("category"), str) or not case["category"]:
            raise SuiteError("%s: category (a string) is required" % where)
        if ("messages" in case) == ("prompt" in case):
            raise SuiteError("%s: give either prompt (one user message) or messages" % where)
        if "messages" in case:
            if not isinstance(case["messages"], list) or not case["messages"]:
                raise SuiteError("%s: messages must be a non-empty list" % where)
            for message in case["messages"]:
                if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
                    raise SuiteError("%s: each message needs a role of system, user, assistant or tool" % where)
        offered = [tool["name"] for tool in case_tools(case, suite["tools"])]
        choice = case.get("tool_choice", "auto")
        if choice not in TOOL_CHOICES:
            raise SuiteError("%s: tool_choice must be one of %s (got %r); a named function is not scored, "
                             "vLLM answers it with finish_reason stop" % (where, ", ".join(TOOL_CHOICES), choice))
        if "max_tokens" in case and (not isinstance(case["max_tokens"], int) or case["max_tokens"] < 1):
            raise SuiteError("%s: max_tokens must be a positive integer" % where)
        expect = case.get("expect")
        if not isinstance(expect, dict) or set(expect) - {"calls", "text", "content_contains"}:
            raise SuiteError("%s: expect is a mapping with calls, or text: true and content_contains" % where)
        if ("calls" in expect) == bool(expect.get("text")):
            raise SuiteError("%s: expect either calls (a list) or text: true" % where)
        if "calls" in expect:
            if not isinstance(expect["calls"], list) or not expect["calls"]:
                raise SuiteError("%s: expect.calls must be a non-empty list" % where)
            if choice == "none":
                raise SuiteError("%s: tool_choice none cannot expect calls" % where)
            for call in expect["calls"]:
                if not isinstance(call, dict) or set(call) - {"name", "arguments"} or "name" not in call:
                    raise SuiteError("%s: each expected call is a mapping with name and arguments" % where)
                if call["name"] not in offered:
                    raise SuiteError("%s: expected call %r is not among the tools offered (%s)" % (
                        where, call["name"], ", ".join(offered)))
                check_expected(call.get("arguments", {}), "%s.%s" % (where, call["name"]))
        else:
            if choice == "required":
                raise SuiteError("%s: tool_choice required cannot expect text" % where)
            contains = expect.get("content_contains", [])
            if not isinstance(contains, list) or not all(isinstance(item, str) for item in contains):
                raise SuiteError("%s: content_contains is a list of strings" % where)


def select_cases(suite: dict, patterns=None, categories=None) -> list:
    """Cases whose id matches one of ``patterns`` (shell globs) and whose category is in ``categories``."""
    cases = suite["cases"]
    if categories:
        cases = [case for case in cases if case["category"] in categories]
    if patterns:
        cases = [case for case in cases if any(fnmatch.fnmatchcase(case["id"], pattern) for pattern in patterns)]
    return cases


def suite_digest(cases: list, tools: dict, settings: dict) -> str:
    """sha256 of what decides a score: the cases, the tools they offer, the request settings.

    Two scores are comparable only when their digests are equal.
    """
    used = {}
    for case in cases:
        for tool in case_tools(case, tools):
            used[tool["name"]] = tool
    blob = json.dumps({"cases": cases, "tools": used, "settings": settings}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def build_request(case: dict, tools: dict, model: str, temperature: float, max_tokens: int, stream: bool) -> dict:
    """The chat completion request body for a case."""
    if "prompt" in case:
        messages = [{"role": "user", "content": case["prompt"]}]
    else:
        messages = []
        for message in case["messages"]:
            message = copy.deepcopy(message)
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                # Written as a mapping in the suite for readability; OpenAI sends a JSON string.
                if isinstance(function.get("arguments"), (dict, list)):
                    function["arguments"] = json.dumps(function["arguments"])
                call.setdefault("type", "function")
            messages.append(message)
    body = {
        "model": model,
        "messages": messages,
        "temperature": temperature,
        "max_tokens": case.get("max_tokens", max_tokens),
        "stream": stream,
    }
    offered = case_tools(case, tools)
    if offered:
        body["tools"] = [{"type": "function", "function": tool} for tool in offered]
        body["tool_choice"] = case.get("tool_choice", "auto")
    return body


# ---------------------------------------------------------------------------
# BFCL (Berkeley Function Calling Leaderboard) data, as shipped by PyPI bfcl-eval
# ---------------------------------------------------------------------------

# Category -> file stems, newest naming first (bfcl-eval 2025+ calls simple "simple_python").
BFCL_CATEGORIES = {
    "simple": ("simple_python", "simple"),
    "multiple": ("multiple",),
    "parallel": ("parallel",),
    "irrelevance": ("irrelevance",),
}
# BFCL's own type names -> JSON Schema ("any" checks nothing).
_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "bool": "boolean",
               "int": "integer", "str": "string", "double": "number", "long": "integer"}


def _bfcl_file(data_dir: str, stems, answers: bool):
    """The newest BFCL_v<N>_<stem>.json for the first stem that has one (not live_<stem>)."""
    folder = os.path.join(data_dir, "possible_answer") if answers else data_dir
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for stem in stems:
        pattern = re.compile(r"^BFCL_v(\d+)_%s\.json$" % re.escape(stem))
        found = sorted((int(m.group(1)), name) for name in names for m in [pattern.match(name)] if m)
        if found:
            return os.path.join(folder, found[-1][1])
    return None


def _read_jsonl(path: str) -> list:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise SuiteError("%s line %d is not JSON: %s" % (path, number, exc)) from exc
    return rows


def bfcl_name(name: str) -> str:
    """BFCL names such as math.factorial, made valid OpenAI tool names the way BFCL's OpenAI handler does."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]


def bfcl_schema(schema):
    """A BFCL parameters schema in JSON Schema terms (dict -> object, float -> number, any -> unchecked)."""
    if not isinstance(schema, dict):
        return schema
    result = {}
    for key, value in schema.items():
        if key == "type":
            if value == "any":
                continue
            result["type"] = _BFCL_TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            result["properties"] = {name: bfcl_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            result[key] = bfcl_schema(value)
        elif key == "optional":
            continue
        else:
            result[key] = value
    return result


def bfcl_expected(acceptable: list):
    """A BFCL list of acceptable values as a matcher ("" in the list means: may be left out)."""
    values = [_bfcl_value(value) for value in acceptable if value != ""]
    optional = "" in acceptable
    if not values:
        return {"$absent": True}
    matcher = values[0] if len(values) == 1 else {"$one_of": values}
    return {"$optional": matcher} if optional else matcher


def _bfcl_value(value):
    if isinstance(value, dict):  # nested parameters: each key again maps to acceptable values
        return {key: bfcl_expected(inner) if isinstance(inner, list) else _bfcl_value(inner)
                for key, inner in value.items()}
    if isinstance(value, list):
        return [_bfcl_value(item) for item in value]
    return value


def load_bfcl(data_dir: str, categories: list, limit: int = 0, tool_choice: str = "auto") -> dict:
    """Turn BFCL's data files under ``data_dir`` (the ``bfcl_eval/data`` folder) into a suite.

    Only reads files; nothing is downloaded. ``limit`` > 0 keeps the first
    ``limit`` entries of each category. ``tool_choice`` applies to the categories
    that expect calls; irrelevance is always asked with ``auto`` (it expects text).
    """
    if not os.path.isdir(data_dir):
        raise SuiteError("bfcl_path %s is not a directory (expected bfcl-eval's bfcl_eval/data folder)" % data_dir)
    cases = []
    for category in categories:
        if category not in BFCL_CATEGORIES:
            raise SuiteError("unknown BFCL category %r (supported: %s)" % (category, ", ".join(BFCL_CATEGORIES)))
        questions_file = _bfcl_file(data_dir, BFCL_CATEGORIES[category], answers=False)
        if questions_file is None:
            raise SuiteError("no BFCL_v*_%s.json under %s" % (BFCL_CATEGORIES[category][0], data_dir))
        questions = _read_jsonl(questions_file)
        if limit > 0:
            questions = questions[:limit]
        answers = {}
        if category != "irrelevance":
            answers_file = _bfcl_file(data_dir, BFCL_CATEGORIES[category], answers=True)
            if answers_file is None:
                raise SuiteError("no possible_answer/BFCL_v*_%s.json under %s" % (BFCL_CATEGORIES[category][0], data_dir))
            answers = {row["id"]: row["ground_truth"] for row in _read_jsonl(answers_file)}
        for row in questions:
            turns = row.get("question") or []
            if len(turns) != 1:
                continue  # multi-turn entries belong to other categories
            tools = [{"name": bfcl_name(f["name"]), "description": f.get("description", ""),
                      "parameters": bfcl_schema(f.get("parameters", {"type": "object", "properties": {}}))}
                     for f in row.get("function", [])]
            case = {"id": "bfcl_" + row["id"], "category": "bfcl_" + category, "messages": turns[0], "tools": tools}
            if category == "irrelevance":
                case["tool_choice"] = "auto"
                case["expect"] = {"text": True}
            else:
                if row["id"] not in answers:
                    raise SuiteError("BFCL %s has no possible answer" % row["id"])
                case["tool_choice"] = tool_choice
                case["expect"] = {"calls": [
                    {"name": bfcl_name(name), "arguments": {param: bfcl_expected(values) for param, values in params.items()}}
                    for call in answers[row["id"]] for name, params in call.items()]}
            cases.append(case)
    return {"name": "bfcl-" + "-".join(categories), "tools": {}, "cases": cases}
