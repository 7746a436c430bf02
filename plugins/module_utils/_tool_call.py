# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Score how well an OpenAI-compatible server (vLLM) calls tools.

Private to the collection; used by ``factory_floor.llm.tool_call_test``. The
scoring half (suite checks, JSON Schema subset, expected-value matching, reply
parsing, SSE reassembly, BFCL conversion) is pure and imports only the standard
library; the HTTP half needs ``requests``.

The rules a case must pass (the gate's contract, MISSION.md / issue 9):

* HTTP 200 with one choice;
* a case that expects calls: ``finish_reason`` is ``tool_calls``; the calls are in
  ``message.tool_calls`` (a call written as text in ``content`` fails); each call
  names a tool the request offered; its ``arguments`` is a JSON object that
  matches the tool's ``parameters`` schema and the case's expected values; the
  calls match the expected ones one to one, in any order;
* a case that expects text: no tool call, ``finish_reason`` ``stop`` (or
  ``length``), non-empty ``content`` that contains what the case asks for;
* streamed (``stream: true``): the same rules on the reply reassembled from the
  server-sent events (content and argument fragments concatenated per tool-call
  ``index``), and the streamed calls must equal the non-streamed ones.

Expected values (``expect.calls[].arguments``) are plain values, compared
recursively: objects key by key (a key the model sent that the case does not
list fails), arrays element by element, numbers by value (5 == 5.0, but
booleans are never numbers), strings after BFCL's normalisation (lower case,
without spaces and the characters ``,./-_*^``). Matchers are single-key
mappings whose key starts with ``$``:

``{$any: true}``        present, any value
``{$absent: true}``     must not be sent
``{$one_of: [a, b]}``   any of the alternatives (which may be matchers)
``{$optional: a}``      a, or not sent
``{$contains: text}``   a string that contains text (normalised)
``{$unordered: [a, b]}``  an array with these elements in any order
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

try:
    import requests
except ImportError:  # pragma: no cover - reported by the module with missing_required_lib()
    requests = None
    HAS_REQUESTS = False
    REQUESTS_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_REQUESTS = True
    REQUESTS_IMPORT_ERROR = None


TOOL_CHOICES = ("auto", "required", "none")
TEXT_FINISH_REASONS = ("stop", "length")
# Bodies kept per failing case (characters); a runaway answer is cut here.
MAX_BODY_CHARS = 20000
# HTTP answers that mean the whole run is pointless (key rejected, wrong URL or model).
ABORT_STATUSES = (401, 403, 404)


class SuiteError(ValueError):
    """The suite (or a BFCL file) is not well formed."""


class SchemaError(ValueError):
    """A tool's parameters schema uses something the checker does not support."""


class AbortRun(RuntimeError):
    """The server answered something that makes every further case pointless."""


# ---------------------------------------------------------------------------
# JSON Schema, the subset OpenAI tool definitions use
# ---------------------------------------------------------------------------

# Keywords that only annotate (JSON Schema 2020-12 treats "format" as an
# annotation by default; "optional" is BFCL's own marker).
_ANNOTATIONS = frozenset(("description", "title", "default", "examples", "format", "optional", "$comment",
                          "$schema", "$id", "deprecated", "readOnly", "writeOnly"))
_KEYWORDS = frozenset(("type", "enum", "properties", "required", "items", "additionalProperties",
                       "minimum", "maximum", "minItems", "maxItems"))
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_ok(value, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "number":
        return _is_number(value)
    if name == "integer":  # JSON Schema: a number with no fractional part (1.0 is an integer)
        return _is_number(value) and float(value).is_integer()
    raise SchemaError("unknown type %r (JSON Schema knows %s)" % (name, ", ".join(_TYPES)))


def check_schema_supported(schema, path: str = "parameters") -> None:
    """Raise :class:`SchemaError` when ``schema`` uses a keyword :func:`schema_errors` cannot check.

    Refusing is safer than ignoring: an unchecked keyword would let wrong
    arguments pass the gate.
    """
    if not isinstance(schema, dict):
        raise SchemaError("%s: a schema must be a mapping, got %s" % (path, type(schema).__name__))
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key not in _KEYWORDS:
            raise SchemaError("%s: keyword %r is not supported by the tool-call checker (it checks %s)" % (
                path, key, ", ".join(sorted(_KEYWORDS))))
        if key == "type":
            names = value if isinstance(value, list) else [value]
            for name in names:
                if name not in _TYPES:
                    raise SchemaError("%s: unknown type %r (JSON Schema knows %s)" % (path, name, ", ".join(_TYPES)))
        elif key == "properties":
            if not isinstance(value, dict):
                raise SchemaError("%s.properties must be a mapping" % path)
            for name, sub in value.items():
                check_schema_supported(sub, "%s.properties.%s" % (path, name))
        elif key == "items" or (key == "additionalProperties" and isinstance(value, dict)):
            check_schema_supported(value, "%s.%s" % (path, key))
        elif key in ("required", "enum") and not isinstance(value, list):
            raise SchemaError("%s.%s must be a list" % (path, key))


def schema_errors(value, schema, path: str = "$") -> list:
    """Where ``value`` breaks ``schema``, as messages; empty when it matches.

    Checks ``type`` (a name or a list of names), ``enum``, ``properties``,
    ``required``, ``items``, ``additionalProperties`` (boolean or schema),
    ``minimum``/``maximum`` and ``minItems``/``maxItems``, with JSON Schema's
    meaning. Call :func:`check_schema_supported` first for anything else.
    """
    errors = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, name) for name in names):
            return ["%s: expected %s, got %s" % (path, " or ".join(names), _json_type(value))]
    if "enum" in schema and not any(_same_json(value, option) for option in schema["enum"]):
        errors.append("%s: %s is not one of %s" % (path, _short(value), _short(schema["enum"])))
    if _is_number(value):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append("%s: %s is less than the minimum %s" % (path, value, schema["minimum"]))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append("%s: %s is more than the maximum %s" % (path, value, schema["maximum"]))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append("%s: required property %r is missing" % (path, name))
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                errors.extend(schema_errors(item, properties[name], "%s.%s" % (path, name)))
            elif extra is False:
                errors.append("%s: property %r is not allowed" % (path, name))
            elif isinstance(extra, dict):
                errors.extend(schema_errors(item, extra, "%s.%s" % (path, name)))
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append("%s: %d items, fewer than minItems %s" % (path, len(value), schema["minItems"]))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append("%s: %d items, more than maxItems %s" % (path, len(value), schema["maxItems"]))
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                errors.extend(schema_errors(item, schema["items"], "%s[%d]" % (path, index)))
    return errors


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _same_json(a, b) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _short(value, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------------
# Expected values
# ---------------------------------------------------------------------------

MATCHERS = ("$any", "$absent", "$one_of", "$optional", "$contains", "$unordered")
_ABSENT = object()


def normalize_text(text: str) -> str:
    """BFCL's string normalisation: lower case, without spaces and ,./-_*^ ; ' read as \"."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def _matcher(expected):
    if isinstance(expected, dict) and len(expected) == 1:
        key = next(iter(expected))
        if isinstance(key, str) and key.startswith("$"):
            if key not in MATCHERS:
                raise SuiteError("unknown matcher %r (known: %s)" % (key, ", ".join(MATCHERS)))
            return key, expected[key]
    return None


def check_expected(expected, path: str = "arguments") -> None:
    """Raise :class:`SuiteError` when an expected value uses a matcher wrongly."""
    found = _matcher(expected)
    if found:
        key, arg = found
        if key in ("$one_of", "$unordered") and not isinstance(arg, list):
            raise SuiteError("%s: %s takes a list" % (path, key))
        if key == "$contains" and not isinstance(arg, str):
            raise SuiteError("%s: $contains takes a string" % path)
        if key in ("$any", "$absent") and arg is not True:
            raise SuiteError("%s: write %s: true" % (path, key))
        if key in ("$one_of", "$unordered"):
            for index, item in enumerate(arg):
                check_expected(item, "%s.%s[%d]" % (path, key, index))
        elif key == "$optional":
            check_expected(arg, "%s.$optional" % path)
    elif isinstance(expected, dict):
        for name, item in expected.items():
            check_expected(item, "%s.%s" % (path, name))
    elif isinstance(expected, list):
        for index, item in enumerate(expected):
            check_expected(item, "%s[%d]" % (path, index))


def value_errors(actual, expected, path: str = "arguments") -> list:
    """Where ``actual`` differs from ``expected`` (see the module docstring), as messages."""
    found = _matcher(expected)
    if found:
        key, arg = found
        if key == "$absent":
            return [] if actual is _ABSENT else ["%s: should not be sent, got %s" % (path, _short(actual))]
        if key == "$optional":
            return [] if actual is _ABSENT else value_errors(actual, arg, path)
        if key == "$one_of":
            for alt in arg:
                if not value_errors(actual, alt, path):
                    return []
            if actual is _ABSENT:
                return ["%s: missing (expected one of %s)" % (path, _short(arg))]
            return ["%s: %s is none of %s" % (path, _short(actual), _short(arg))]
        if actual is _ABSENT:
            return ["%s: missing" % path]
        if key == "$any":
            return []
        if key == "$contains":
            if isinstance(actual, str) and normalize_text(arg) in normalize_text(actual):
                return []
            return ["%s: %s does not contain %r" % (path, _short(actual), arg)]
        if key == "$unordered":
            if not isinstance(actual, list) or len(actual) != len(arg):
                return ["%s: expected %d items in any order, got %s" % (path, len(arg), _short(actual))]
            if _assign(actual, arg, lambda a, e: not value_errors(a, e, path)) is None:
                return ["%s: %s does not hold %s (in any order)" % (path, _short(actual), _short(arg))]
            return []
    if actual is _ABSENT:
        return ["%s: missing (expected %s)" % (path, _short(expected))]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return ["%s: expected an object, got %s" % (path, _short(actual))]
        errors = []
        for name, item in expected.items():
            errors.extend(value_errors(actual.get(name, _ABSENT), item, "%s.%s" % (path, name)))
        for name in actual:
            if name not in expected:
                errors.append("%s.%s: not expected (got %s)" % (path, name, _short(actual[name])))
        return errors
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return ["%s: expected %s, got %s" % (path, _short(expected), _short(actual))]
        errors = []
        for index, (a, e) in enumerate(zip(actual, expected)):
            errors.extend(value_errors(a, e, "%s[%d]" % (path, index)))
        return errors
    if isinstance(expected, str):
        if isinstance(actual, str) and normalize_text(actual) == normalize_text(expected):
            return []
        return ["%s: expected %s, got %s" % (path, _short(expected), _short(actual))]
    if isinstance(expected, bool) or expected is None:
        if actual is expected:
            return []
        return ["%s: expected %s, got %s" % (path, _short(expected), _short(actual))]
    if _is_number(expected):
        if _is_number(actual) and actual == expected:
            return []
        return ["%s: expected %s, got %s" % (path, _short(expected), _short(actual))]
    raise SuiteError("%s: cannot compare with %r" % (path, expected))


def _assign(actuals: list, expecteds: list, fits):
    """One-to-one assignment of actuals to expecteds where fits(actual, expected); None if there is none."""
    choice = [None] * len(expecteds)
    used = [False] * len(actuals)

    def place(index):
        if index == len(expecteds):
            return True
        for position, actual in enumerate(actuals):
            if not used[position] and fits(actual, expecteds[index]):
                used[position] = True
                choice[index] = position
                if place(index + 1):
                    return True
                used[position] = False
        return False

    return list(choice) if place(0) else None


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
        check_schema_supported(parameters, "%s.parameters" % where)
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
# Replies
# ---------------------------------------------------------------------------

class Reply:
    """What one chat completion answered: finish_reason, content and tool calls (raw arguments text)."""

    def __init__(self, finish_reason=None, content=None, tool_calls=None, error=None):
        self.finish_reason = finish_reason
        self.content = content
        self.tool_calls = tool_calls or []  # [{"index", "id", "type", "name", "arguments"}]
        self.error = error  # the answer could not be read as a chat completion

    def calls(self) -> list:
        """[(name, parsed arguments or the raw text when it is not JSON)] in index order."""
        result = []
        for call in self.tool_calls:
            try:
                arguments = json.loads(call["arguments"])
            except (TypeError, ValueError):
                arguments = call["arguments"]
            result.append((call["name"], arguments))
        return result


def parse_completion(body) -> Reply:
    """Read a non-streamed chat completion (the decoded JSON body)."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        return Reply(error="the answer is not a chat completion with a choice")
    if not isinstance(message, dict):
        return Reply(error="the answer's message is not an object")
    calls = []
    for index, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            return Reply(error="tool_calls[%d] is not an object with a function: %s" % (index, _short(call)))
        function = call["function"]
        calls.append({"index": index, "id": call.get("id"), "type": call.get("type"),
                      "name": function.get("name"), "arguments": function.get("arguments")})
    return Reply(choice.get("finish_reason"), message.get("content"), calls)


def parse_stream(lines) -> Reply:
    """Reassemble a streamed chat completion from its server-sent event lines (str, without newlines).

    Content deltas are concatenated; tool-call deltas are gathered per
    ``index``: ``id`` and ``type`` from the first delta that has them, ``name``
    and ``arguments`` fragments concatenated in arrival order. The stream must
    end with ``data: [DONE]``; an error event ends it with an error.
    """
    content = []
    calls = {}
    finish_reason = None
    done = False
    for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, comments (":"), event:/id: fields
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            return Reply(error="an event is not JSON: %s" % data[:200])
        if not isinstance(chunk, dict):
            return Reply(error="an event is not a JSON object: %s" % data[:200])
        if "error" in chunk or chunk.get("object") == "error":
            error = chunk.get("error", chunk)
            return Reply(error="the stream sent an error: %s" % _short(error, 300))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or not isinstance(choice.get("delta") or {}, dict):
                return Reply(error="an event's choice is not an object with a delta: %s" % data[:200])
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                if not isinstance(part, dict):
                    return Reply(error="a tool_calls delta is not an object: %s" % data[:200])
                index = part.get("index", 0)
                call = calls.setdefault(index, {"index": index, "id": None, "type": None, "name": "", "arguments": ""})
                if part.get("id") and not call["id"]:
                    call["id"] = part["id"]
                if part.get("type") and not call["type"]:
                    call["type"] = part["type"]
                function = part.get("function") or {}
                if function.get("name"):
                    call["name"] += function["name"]
                if function.get("arguments"):
                    call["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
    if not done:
        return Reply(finish_reason, "".join(content) or None, [calls[i] for i in sorted(calls)],
                     error="the stream ended without data: [DONE]")
    return Reply(finish_reason, "".join(content) or None, [calls[i] for i in sorted(calls)])


_CALL_MARKUP = re.compile(r"<tool_call>|<function[=>\s]|\[TOOL_CALLS\]|<\|python_tag\|>", re.I)
_CALL_JSON_NAME = re.compile(r"[\"']name[\"']\s*:")
_CALL_JSON_ARGS = re.compile(r"[\"'](arguments|parameters)[\"']\s*:")


def looks_like_call(content: str) -> bool:
    """Whether text holds a tool call the server's parser did not take out: tool-call markup
    (``<tool_call>``, ``<function=``, ``[TOOL_CALLS]``, ``<|python_tag|>``) or JSON with a name and arguments."""
    return bool(_CALL_MARKUP.search(content)) or bool(_CALL_JSON_NAME.search(content) and _CALL_JSON_ARGS.search(content))


def reply_errors(reply: Reply, case: dict, offered: list) -> list:
    """Why ``reply`` does not pass ``case``; empty when it does. ``offered`` are the tool definitions sent."""
    if reply.error:
        return [reply.error]
    expect = case["expect"]
    content = reply.content if isinstance(reply.content, str) else ""
    if "calls" not in expect:
        errors = []
        if reply.tool_calls:
            errors.append("expected a text answer, got tool calls %s" % _short(reply.calls()))
        if reply.finish_reason not in TEXT_FINISH_REASONS:
            errors.append("finish_reason is %s, expected stop" % reply.finish_reason)
        if not content.strip():
            errors.append("the text answer is empty")
        elif looks_like_call(content) and not reply.tool_calls:
            errors.append("the answer holds a tool call written as text in content: %s" % _short(content))
        for wanted in expect.get("content_contains", []):
            if normalize_text(wanted) not in normalize_text(content):
                errors.append("the answer does not contain %r" % wanted)
        return errors

    errors = []
    if reply.finish_reason != "tool_calls":
        errors.append("finish_reason is %s, expected tool_calls" % reply.finish_reason)
    if not reply.tool_calls:
        if looks_like_call(content):
            errors.append("the tool call is in content, not in tool_calls: %s" % _short(content))
        else:
            errors.append("no tool call (content: %s)" % _short(content or None))
        return errors
    schemas = {tool["name"]: tool["parameters"] for tool in offered}
    parsed = []
    for call in reply.tool_calls:
        where = "call %d (%s)" % (call["index"], call["name"])
        if call["name"] not in schemas:
            errors.append("%s: the request offered no tool of that name (offered: %s)" % (where, ", ".join(schemas)))
            continue
        try:
            arguments = json.loads(call["arguments"] or "")
        except (TypeError, ValueError):
            errors.append("%s: arguments are not valid JSON: %s" % (where, _short(call["arguments"])))
            continue
        if not isinstance(arguments, dict):
            errors.append("%s: arguments are not a JSON object: %s" % (where, _short(arguments)))
            continue
        schema_problems = schema_errors(arguments, schemas[call["name"]], "arguments")
        if schema_problems:
            errors.append("%s: does not match the tool's schema: %s" % (where, "; ".join(schema_problems)))
            continue
        parsed.append((call["name"], arguments))
    if errors:
        return errors
    expected = expect["calls"]
    if len(parsed) != len(expected):
        return ["expected %d call(s) %s, got %d: %s" % (
            len(expected), ", ".join(c["name"] for c in expected), len(parsed), _short(parsed))]

    def fits(actual, wanted):
        return actual[0] == wanted["name"] and not value_errors(actual[1], wanted.get("arguments", {}))

    if _assign(parsed, expected, fits) is None:
        # Say what is wrong with the closest candidate for each expected call.
        for wanted in expected:
            same_name = [args for name, args in parsed if name == wanted["name"]]
            if not same_name:
                errors.append("no call of %s (got %s)" % (wanted["name"], ", ".join(name for name, _args in parsed)))
                continue
            problems = min((value_errors(args, wanted.get("arguments", {})) for args in same_name), key=len)
            if problems:
                errors.append("%s: %s" % (wanted["name"], "; ".join(problems)))
        if not errors:
            errors.append("the calls do not match the expected ones one to one: %s" % _short(parsed))
    return errors


def stream_mismatch(plain: Reply, streamed: Reply):
    """Why the streamed calls differ from the non-streamed ones, or None when they are equal (in any order)."""
    def canonical(reply):
        return sorted(json.dumps([name, args], sort_keys=True) for name, args in reply.calls())

    if canonical(plain) != canonical(streamed):
        return "the streamed calls %s differ from the non-streamed calls %s" % (
            _short(streamed.calls(), 300), _short(plain.calls(), 300))
    return None


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


# ---------------------------------------------------------------------------
# Running a suite against a server
# ---------------------------------------------------------------------------

def normalize_url(url: str) -> str:
    """Base URL without a trailing / or /v1."""
    if not re.match(r"^https?://[^/]+", url or ""):
        raise ValueError("url must be an http:// or https:// URL, got %r" % url)
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3]
    return url


def _headers(api_key):
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    return headers


def _cut(text: str) -> str:
    if len(text) <= MAX_BODY_CHARS:
        return text
    return text[:MAX_BODY_CHARS] + "... (%d more characters)" % (len(text) - MAX_BODY_CHARS)


class Exchange:
    """One request and what came back."""

    def __init__(self):
        self.status = None  # HTTP status, None when none came
        self.body = ""      # the raw answer (JSON text, or the SSE lines)
        self.latency = None  # seconds from sending to the whole answer
        self.reply = None
        self.error = None   # transport or HTTP error, as a sentence


def post(session, url: str, body: dict, api_key, timeout: float) -> Exchange:
    """POST a chat completion (streamed when body['stream']) and read the whole answer."""
    exchange = Exchange()
    started = time.monotonic()
    no_proxies = {"http": None, "https": None, "all": None}
    try:
        response = session.post(url, json=body, headers=_headers(api_key), timeout=(min(timeout, 10.0), timeout),
                                proxies=no_proxies, allow_redirects=False, stream=body["stream"])
        exchange.status = response.status_code
        if body["stream"] and response.status_code == 200:
            lines = []
            for raw in response.iter_lines():
                lines.append(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
                if time.monotonic() - started > timeout:
                    response.close()
                    exchange.error = "the stream did not end within %ss" % timeout
                    break
            exchange.body = _cut("\n".join(lines))
            if exchange.error is None:
                exchange.reply = parse_stream(lines)
        else:
            text = response.content.decode("utf-8", "replace")
            exchange.body = _cut(text)
            if response.status_code == 200:
                try:
                    exchange.reply = parse_completion(json.loads(text))
                except ValueError:
                    exchange.reply = Reply(error="the answer is not JSON")
            else:
                exchange.error = "HTTP %s" % response.status_code
    except requests.exceptions.ConnectionError as exc:
        exchange.error = "no answer from %s: %s" % (url, _reason(exc))
    except requests.exceptions.Timeout:
        exchange.error = "no answer from %s within %ss" % (url, timeout)
    except requests.exceptions.RequestException as exc:
        exchange.error = "request to %s failed: %s" % (url, _reason(exc))
    exchange.latency = time.monotonic() - started
    if exchange.error is None and exchange.latency > timeout:
        exchange.error = "the answer took %.1fs, more than the timeout %ss" % (exchange.latency, timeout)
    return exchange


def _reason(exc) -> str:
    text = str(exc)
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text[:300]


def run_case(session, url: str, case: dict, tools: dict, model: str, api_key=None, timeout: float = 120.0,
             temperature: float = 0.0, max_tokens: int = 512, streaming: bool = True) -> dict:
    """Run one case non-streamed (and streamed) and score it. Raises :class:`AbortRun` on 401/403/404."""
    offered = case_tools(case, tools)
    result = {"id": case["id"], "category": case["category"], "passed": False, "reasons": [],
              "latency": None, "stream_latency": None, "calls": [], "body": None, "stream_body": None, "answered": False}
    runs = [("non-stream", False)] + ([("stream", True)] if streaming else [])
    replies = {}
    for label, stream in runs:
        exchange = post(session, url, build_request(case, tools, model, temperature, max_tokens, stream),
                        api_key, timeout)
        if exchange.status in ABORT_STATUSES:
            raise AbortRun("POST %s answered HTTP %s%s: %s" % (
                url, exchange.status,
                " (the server rejected the api_key)" if exchange.status in (401, 403) else
                " (wrong URL, or the server does not serve model %r)" % model, exchange.body[:300]))
        result["answered"] = result["answered"] or exchange.status is not None
        result["stream_latency" if stream else "latency"] = round(exchange.latency, 3)
        result["stream_body" if stream else "body"] = exchange.body
        if exchange.error:
            result["reasons"].append("%s: %s" % (label, exchange.error))
            continue
        replies[label] = exchange.reply
        if not stream:
            result["calls"] = [{"name": name, "arguments": args} for name, args in exchange.reply.calls()]
        result["reasons"].extend("%s: %s" % (label, why) for why in reply_errors(exchange.reply, case, offered))
    if not result["reasons"] and "stream" in replies and "calls" in case["expect"]:
        mismatch = stream_mismatch(replies["non-stream"], replies["stream"])
        if mismatch:
            result["reasons"].append(mismatch)
    result["passed"] = not result["reasons"]
    return result


def score(results: list) -> dict:
    """Score 0-100 (percent of cases passed, one decimal) overall and per category."""
    by_category = {}
    for result in results:
        entry = by_category.setdefault(result["category"], {"total": 0, "passed": 0})
        entry["total"] += 1
        entry["passed"] += 1 if result["passed"] else 0
    for entry in by_category.values():
        entry["score"] = round(100.0 * entry["passed"] / entry["total"], 1)
    passed = sum(1 for result in results if result["passed"])
    latencies = [r["latency"] for r in results if r["latency"] is not None]
    return {
        "score": round(100.0 * passed / len(results), 1) if results else 0.0,
        "total": len(results),
        "passed_count": passed,
        "by_category": by_category,
        "latency_mean": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "latency_max": round(max(latencies), 3) if latencies else None,
    }


def run_suite(url: str, cases: list, tools: dict, model: str, api_key=None, timeout: float = 120.0,
              temperature: float = 0.0, max_tokens: int = 512, streaming: bool = True, concurrency: int = 1,
              session_factory=None) -> list:
    """Run the cases against ``url`` (the server's base URL); return the per-case results in the order of ``cases``.

    Up to ``concurrency`` cases run at once, each in its own thread with its own
    session (``session_factory()``, by default ``requests.Session``; a session is
    never shared between threads). A case's requests (non-streamed, then streamed)
    stay one after the other inside it. Given the same answers, the results do
    not depend on ``concurrency``: they are collected in the order of ``cases``.

    :class:`AbortRun` (HTTP 401/403/404) stops the run: no case after the
    aborting one starts, the cases already running finish, and the cases before
    it still run, so the abort raised is the first in the order of ``cases``,
    the one a run one case at a time would raise.
    """
    if not HAS_REQUESTS:
        raise RuntimeError("the Python library requests is required: %s" % REQUESTS_IMPORT_ERROR)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError("concurrency must be 1 (one case at a time) or more, got %r" % (concurrency,))
    endpoint = normalize_url(url) + "/v1/chat/completions"
    new_session = session_factory or requests.Session
    sessions = []
    sessions_lock = threading.Lock()
    per_thread = threading.local()
    # Index of the first case that raised; the cases after it are skipped.
    stop = {"at": len(cases)}
    stop_lock = threading.Lock()

    def thread_session():
        session = getattr(per_thread, "session", None)
        if session is None:
            session = per_thread.session = new_session()
            with sessions_lock:
                sessions.append(session)
        return session

    def one(index, case):
        with stop_lock:
            if index > stop["at"]:  # an earlier case aborted the run: send nothing more
                return None
        try:
            return run_case(thread_session(), endpoint, case, tools, model, api_key, timeout, temperature,
                            max_tokens, streaming)
        except BaseException:
            with stop_lock:
                stop["at"] = min(stop["at"], index)
            raise

    workers = min(concurrency, len(cases))
    try:
        if workers <= 1:
            return [one(index, case) for index, case in enumerate(cases)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tool-call") as pool:
            futures = [pool.submit(one, index, case) for index, case in enumerate(cases)]
        # Leaving the with block waited for every case.
        for future in futures:  # the first error in the order of the cases, as one case at a time meets it
            if future.exception() is not None:
                raise future.exception()
        return [future.result() for future in futures]
    finally:
        for session in sessions:
            session.close()


def combine_runs(runs: list) -> dict:
    """Judge each case by majority over repeated runs of the same cases (a tie fails).

    ``runs`` is a list of result lists, each in the same case order (``run_suite``'s
    return). A case whose verdict differs between runs is *flipped*: greedy decoding
    is not batch-invariant, and the same build can pass a case once and fail it the
    next time. Returns ``results`` (per case: the first run's result that agrees with
    the majority, its ``passed`` the majority verdict, ``verdicts`` every run's),
    ``flipped`` (case ids, in case order) and ``scores`` (each run's score).
    """
    if not runs or any(len(run) != len(runs[0]) for run in runs):
        raise ValueError("combine_runs needs one or more runs of the same cases")
    results = []
    flipped = []
    for index in range(len(runs[0])):
        verdicts = [bool(run[index]["passed"]) for run in runs]
        ids = {run[index]["id"] for run in runs}
        if len(ids) != 1:
            raise ValueError("runs list different cases at position %d: %s" % (index, sorted(ids)))
        passed = sum(verdicts) * 2 > len(verdicts)
        chosen = next(run[index] for run in runs if bool(run[index]["passed"]) == passed)
        result = dict(chosen, passed=passed, verdicts=verdicts)
        if len(set(verdicts)) > 1:
            flipped.append(result["id"])
            if not passed:
                result["reasons"] = list(result["reasons"]) + [
                    "passed in %d of %d runs (a majority is needed)" % (sum(verdicts), len(verdicts))]
        results.append(result)
    return {"results": results, "flipped": flipped, "scores": [score(run)["score"] for run in runs]}


def first_model(url: str, api_key=None, timeout: float = 10.0, session=None) -> str:
    """The first model id ``GET /v1/models`` lists."""
    target = normalize_url(url) + "/v1/models"
    getter = session or requests
    try:
        response = getter.get(target, headers=_headers(api_key), timeout=timeout,
                              proxies={"http": None, "https": None, "all": None})
    except requests.exceptions.RequestException as exc:
        raise AbortRun("GET %s: %s" % (target, _reason(exc))) from exc
    if response.status_code != 200:
        raise AbortRun("GET %s answered HTTP %s: %s" % (target, response.status_code, response.text[:300]))
    try:
        return str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise AbortRun("GET %s did not list a model" % target) from exc
