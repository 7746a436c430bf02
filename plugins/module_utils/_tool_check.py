# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The tool-calling gate's rules: JSON Schema of a tool's parameters, expected values, replies.

Private to the collection; the checking layer of ``factory_floor.llm.tool_call_test``
(``_tool_suite`` reads suites, ``_tool_call`` runs them and scores). Pure: the
standard library and ``jsonschema`` (checked by the module with ``missing_required_lib``).

The rules a case must pass (the gate's contract):

* HTTP 200 with one choice;
* a case that expects calls: ``finish_reason`` is ``tool_calls``; the calls are in
  ``message.tool_calls`` (a call written as text in ``content`` fails, and so does
  tool-call markup left in ``content`` beside them); each call names a tool the
  request offered; its ``arguments`` is a JSON object that matches the tool's
  ``parameters`` JSON Schema (checked with the ``jsonschema`` library) and the
  case's expected values; the calls match the expected ones one to one, in any
  order;
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

import json
import re
import traceback
from urllib.parse import unquote

try:
    import jsonschema
    import jsonschema.exceptions
    import jsonschema.validators
except ImportError:  # pragma: no cover - reported by the module with missing_required_lib()
    jsonschema = None
    HAS_JSONSCHEMA = False
    JSONSCHEMA_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_JSONSCHEMA = True
    JSONSCHEMA_IMPORT_ERROR = None


TOOL_CHOICES = ("auto", "required", "none")
TEXT_FINISH_REASONS = ("stop", "length")


class SuiteError(ValueError):
    """The suite (or a BFCL file) is not well formed."""


class SchemaError(ValueError):
    """A tool's parameters schema is not a JSON Schema the gate can check in full."""


# ---------------------------------------------------------------------------
# JSON Schema of a tool's parameters, checked with the jsonschema library
# ---------------------------------------------------------------------------

# Keywords that only annotate or that another keyword reads (then/else: if;
# minContains/maxContains: contains), beside each draft's validation keywords.
# "optional" is BFCL's own marker, "discriminator" OpenAPI's (pydantic writes it
# next to the oneOf it describes); keys starting with "x-" are extensions.
_ANNOTATIONS = frozenset((
    "$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary", "$comment", "$defs", "definitions", "id",
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    "contentMediaType", "contentEncoding", "contentSchema", "then", "else", "minContains", "maxContains",
    "optional", "discriminator",
))
# Where a keyword holds schemas: one schema, a list of them, or a mapping of name -> schema.
_ONE_SCHEMA = ("additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems", "contains",
               "propertyNames", "not", "if", "then", "else", "contentSchema")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")


def _validator_class(schema):
    """The draft the schema names in ``$schema``, else 2020-12 (what OpenAI, pydantic and MCP tool schemas use)."""
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def _resolves(schema, ref: str) -> bool:
    """Whether a local reference (``#`` or ``#/a/b``, JSON Pointer) names a place in ``schema``."""
    if ref == "#":
        return True
    if not ref.startswith("#/"):
        return False
    node = schema
    for part in ref[2:].split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def _check_keywords(node, root, known, path):
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise SchemaError("%s: a schema is a mapping (or true/false), got %s" % (path, _short(node)))
    for key, value in node.items():
        if key not in known and key not in _ANNOTATIONS and not key.startswith("x-"):
            raise SchemaError("%s: %r is not a JSON Schema keyword (a typo? an OpenAPI word such as nullable?); "
                              "the gate refuses what it would not check" % (path, key))
        if key in ("$ref", "$dynamicRef"):
            if not isinstance(value, str) or not _resolves(root, value):
                raise SchemaError("%s: %s %s is not a reference into this schema (#/$defs/NAME); the gate follows "
                                  "no other, and fetches nothing" % (path, key, _short(value)))
        elif key in _ONE_SCHEMA or (key == "items" and not isinstance(value, list)):
            _check_keywords(value, root, known, "%s.%s" % (path, key))
        elif key in _SCHEMA_LISTS or key == "items":
            for index, sub in enumerate(value if isinstance(value, list) else []):
                _check_keywords(sub, root, known, "%s.%s[%d]" % (path, key, index))
        elif key in _SCHEMA_MAPS or (key == "dependencies" and isinstance(value, dict)):
            for name, sub in (value.items() if isinstance(value, dict) else ()):
                if key != "dependencies" or not isinstance(sub, list):  # draft 7: a list of property names
                    _check_keywords(sub, root, known, "%s.%s.%s" % (path, key, name))


def check_schema(schema, path: str = "parameters") -> None:
    """Raise :class:`SchemaError` when ``schema`` is not a JSON Schema the gate checks in full.

    The schema must be valid under its draft's meta-schema (``$schema``, default
    2020-12), use only that draft's keywords and annotations (a typo or an OpenAPI
    word would be ignored by a validator, letting wrong arguments pass), and refer
    only into itself (``$ref: '#/$defs/NAME'``; nothing is fetched).
    """
    if jsonschema is None:
        raise RuntimeError("the Python library jsonschema is required: %s" % JSONSCHEMA_IMPORT_ERROR)
    if not isinstance(schema, dict):
        raise SchemaError("%s: a schema must be a mapping, got %s" % (path, type(schema).__name__))
    cls = _validator_class(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in exc.path)
        raise SchemaError("%s%s: not a valid JSON Schema (%s): %s" % (
            path, where, cls.META_SCHEMA.get("$schema", cls.__name__), exc.message)) from None
    _check_keywords(schema, schema, frozenset(cls.VALIDATORS), path)


def _where(path, error) -> str:
    return path + "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in error.absolute_path)


def schema_errors(value, schema, path: str = "$") -> list:
    """Where ``value`` breaks ``schema``, as messages; empty when it matches.

    Validated by the ``jsonschema`` library with the schema's draft (``$schema``,
    default 2020-12); ``format`` is an annotation (not asserted), as 2020-12 says.
    Call :func:`check_schema` on the schema first.
    """
    if jsonschema is None:
        raise RuntimeError("the Python library jsonschema is required: %s" % JSONSCHEMA_IMPORT_ERROR)
    validator = _validator_class(schema)(schema)
    errors = []
    try:
        for error in validator.iter_errors(value):
            message = error.message
            if error.context:  # anyOf / oneOf: why each alternative failed
                why = []
                for sub in error.context:
                    where = "".join("[%d]" % p if isinstance(p, int) else ".%s" % p for p in sub.relative_path)
                    text = (where.lstrip(".") + ": " if where else "") + sub.message
                    if text not in why:
                        why.append(text)
                message += " (%s)" % "; ".join(why[:4] + (["..."] if len(why) > 4 else []))
            text = "%s: %s" % (_where(path, error), message)
            if text not in errors:
                errors.append(text)
    except Exception as exc:  # pylint: disable=broad-except  # a $ref check_schema let through: never crash a run
        errors.append("%s: the schema could not be applied: %s: %s" % (path, type(exc).__name__, exc))
    return errors


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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


# Beside parsed tool_calls, the closing tags a parser left behind count too.
_CALL_CLOSING = re.compile(r"</tool_call>|</function>", re.I)


def markup_left(content: str) -> bool:
    """Whether content that came with parsed ``tool_calls`` still holds tool-call markup: what
    :func:`looks_like_call` finds, or a closing ``</tool_call>`` / ``</function>`` tag. A client shows
    that text to its user (or runs the call twice)."""
    return looks_like_call(content) or bool(_CALL_CLOSING.search(content))


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
    if markup_left(content):
        errors.append("tool-call markup left in content beside the tool_calls: %s" % _short(content))
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
