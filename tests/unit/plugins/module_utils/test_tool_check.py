# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_tool_check.py: the rules a reply must pass, without HTTP.

The answers below are shaped like vLLM's OpenAI-compatible server's (field names,
nulls, how a streamed tool call arrives in fragments, the usage chunk with no
choices, ``data: [DONE]``). They test the scoring of those shapes, not vLLM: the
lab runs the suite against real vLLM.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_check as check
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_suite as suites


# --- vLLM-shaped answers (shared with the module tests) ------------------------

def completion(calls=None, content=None, finish_reason=None, model="lab-chat"):
    """A non-streamed chat completion as vLLM answers it; calls are (name, arguments text or dict)."""
    tool_calls = [{"id": "chatcmpl-tool-%032x" % i, "type": "function",
                   "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                  for i, (name, args) in enumerate(calls or [])]
    if finish_reason is None:
        finish_reason = "tool_calls" if calls else "stop"
    return {
        "id": "chatcmpl-9b1c", "object": "chat.completion", "created": 1795950000, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None,
                                             "annotations": None, "audio": None, "function_call": None,
                                             "tool_calls": tool_calls, "reasoning_content": None},
                     "logprobs": None, "finish_reason": finish_reason, "stop_reason": None}],
        "usage": {"prompt_tokens": 212, "total_tokens": 230, "completion_tokens": 18, "prompt_tokens_details": None},
        "prompt_logprobs": None, "kv_transfer_params": None,
    }


def sse(calls=None, content=None, finish_reason=None, fragment=7, model="lab-chat", done=True):
    """The same answer streamed: SSE lines (no newlines), arguments split into fragments of ``fragment`` characters."""
    def chunk(delta, finish=None):
        return "data: " + json.dumps({
            "id": "chatcmpl-9b1c", "object": "chat.completion.chunk", "created": 1795950000, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                         **({"stop_reason": None} if finish else {})}]}, separators=(",", ":"))

    lines = [chunk({"role": "assistant", "content": ""}), ""]
    for piece in [content[i:i + fragment] for i in range(0, len(content or ""), fragment)]:
        lines += [chunk({"content": piece}), ""]
    for index, (name, args) in enumerate(calls or []):
        text = args if isinstance(args, str) else json.dumps(args)
        first = {"id": "chatcmpl-tool-%032x" % index, "type": "function", "index": index,
                 "function": {"name": name, "arguments": ""}}
        lines += [chunk({"tool_calls": [first]}), ""]
        for piece in [text[i:i + fragment] for i in range(0, len(text), fragment)]:
            lines += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}), ""]
    if finish_reason is None:
        finish_reason = "tool_calls" if calls else "stop"
    lines += [chunk({"content": ""}, finish_reason), ""]
    lines += ["data: " + json.dumps({"id": "chatcmpl-9b1c", "object": "chat.completion.chunk", "created": 1795950000,
                                     "model": model, "choices": [],
                                     "usage": {"prompt_tokens": 212, "total_tokens": 230, "completion_tokens": 18}}), ""]
    if done:
        lines += ["data: [DONE]", ""]
    return lines


# What SmolLM2 writes when vLLM's xlam parser does not pick the call up: the call as text.
CALL_IN_CONTENT = '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>'

WEATHER = {"name": "get_weather", "description": "Weather", "parameters": {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city"]}}
STOCK = {"name": "get_stock_price", "description": "Price", "parameters": {
    "type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}


def call_case(calls, tools=("get_weather", "get_stock_price"), choice="required"):
    return {"id": "c", "category": "single", "prompt": "p", "tools": list(tools), "tool_choice": choice,
            "expect": {"calls": calls}}


TOOLS = {"get_weather": {k: v for k, v in WEATHER.items() if k != "name"},
         "get_stock_price": {k: v for k, v in STOCK.items() if k != "name"}}
OFFERED = [WEATHER, STOCK]


def errors_for(body, case):
    return check.reply_errors(check.parse_completion(body), case, suites.case_tools(case, TOOLS))


# --- JSON Schema (the jsonschema library) --------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "description": "annotations are ignored", "default": "x", "format": "date"},
        "priority": {"type": "string", "enum": ["low", "high"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "owner": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
                  "additionalProperties": False},
        "maybe": {"type": ["string", "null"]},
    },
    "required": ["title", "priority"],
}


# The verdicts the hand-written subset checker gave before the gate used jsonschema
# (the default suite's schemas use only these keywords): they must not change.
@pytest.mark.parametrize("value, ok", [
    ({"title": "a", "priority": "low"}, True),
    ({"title": "a", "priority": "low", "count": 3, "ratio": 0.5, "flag": True, "tags": ["x"],
      "owner": {"name": "Dana"}, "maybe": None, "extra": 1}, True),
    ({"title": "a", "priority": "low", "count": 3.0}, True),      # 3.0 is an integer in JSON Schema
    ({"title": "a", "priority": "low", "ratio": 2}, True),        # an integer is a number
    ({"title": "not-a-date", "priority": "low"}, True),           # format is an annotation (2020-12)
    ({"title": "a"}, False),                                      # required missing
    ({"title": "a", "priority": "medium"}, False),                # not in enum
    ({"title": 5, "priority": "low"}, False),                     # wrong type
    ({"title": "a", "priority": "low", "count": 2.5}, False),     # not an integer
    ({"title": "a", "priority": "low", "count": True}, False),    # a boolean is not an integer
    ({"title": "a", "priority": "low", "count": 0}, False),       # below minimum
    ({"title": "a", "priority": "low", "count": 11}, False),      # above maximum
    ({"title": "a", "priority": "low", "flag": "true"}, False),   # a string is not a boolean
    ({"title": "a", "priority": "low", "tags": ["x", 1]}, False),  # item type
    ({"title": "a", "priority": "low", "tags": []}, False),       # minItems
    ({"title": "a", "priority": "low", "tags": ["a", "b", "c", "d"]}, False),  # maxItems
    ({"title": "a", "priority": "low", "owner": {}}, False),      # nested required
    ({"title": "a", "priority": "low", "owner": {"name": "D", "x": 1}}, False),  # additionalProperties false
    ({"title": "a", "priority": "low", "maybe": 1}, False),       # type list
    ([], False),
])
def test_schema_verdicts_of_the_subset_kept(value, ok):
    check.check_schema(SCHEMA)
    errors = check.schema_errors(value, SCHEMA)
    assert (errors == []) is ok, errors


def test_schema_errors_name_the_place():
    errors = check.schema_errors({"title": "a", "priority": "low", "owner": {"name": 3}}, SCHEMA, "arguments")
    assert errors == ["arguments.owner.name: 3 is not of type 'string'"]
    errors = check.schema_errors({"priority": "urgent", "tags": ["x", 1]}, SCHEMA, "arguments")
    assert "arguments: 'title' is a required property" in errors
    assert "arguments.priority: 'urgent' is not one of ['low', 'high']" in errors
    assert "arguments.tags[1]: 1 is not of type 'string'" in errors


# What pydantic (v2, model_json_schema) writes for a tool's arguments model: titles,
# Optional[...] as anyOf with null, an Enum as a $ref into $defs, a nested model,
# Literal as const, constr/conint as minLength/exclusiveMinimum.
PYDANTIC_WEATHER = {
    "$defs": {
        "Unit": {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"},
        "Place": {"properties": {"city": {"minLength": 1, "title": "City", "type": "string"},
                                 "country": {"anyOf": [{"maxLength": 2, "minLength": 2, "type": "string"},
                                                       {"type": "null"}], "default": None, "title": "Country"}},
                  "required": ["city"], "title": "Place", "type": "object"},
    },
    "properties": {
        "place": {"$ref": "#/$defs/Place"},
        "unit": {"anyOf": [{"$ref": "#/$defs/Unit"}, {"type": "null"}], "default": None},
        "days": {"anyOf": [{"exclusiveMinimum": 0, "maximum": 14, "type": "integer"}, {"type": "null"}],
                 "default": None, "title": "Days"},
        "kind": {"const": "forecast", "default": "forecast", "title": "Kind", "type": "string"},
    },
    "required": ["place"],
    "title": "GetWeatherArguments",
    "type": "object",
    "additionalProperties": False,
}
# The same constraints written out by hand, with no anyOf, $ref, $defs or const.
FLAT_WEATHER = {
    "type": "object",
    "properties": {
        "place": {"type": "object", "properties": {
            "city": {"type": "string", "minLength": 1},
            "country": {"type": ["string", "null"], "minLength": 2, "maxLength": 2}}, "required": ["city"]},
        "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit", None]},
        "days": {"type": ["integer", "null"], "exclusiveMinimum": 0, "maximum": 14},
        "kind": {"type": "string", "enum": ["forecast"]},
    },
    "required": ["place"],
    "additionalProperties": False,
}
WEATHER_ARGUMENTS = [
    ({"place": {"city": "Paris"}}, True),
    ({"place": {"city": "Paris", "country": "FR"}, "unit": "celsius", "days": 3, "kind": "forecast"}, True),
    ({"place": {"city": "Paris", "country": None}, "unit": None, "days": None}, True),
    ({"place": {"city": "Paris"}, "days": 14.0}, True),              # 14.0 is an integer
    ({"place": {"city": ""}}, False),                                # minLength
    ({"place": {"city": "Paris", "country": "FRA"}}, False),         # maxLength inside anyOf
    ({"place": {"country": "FR"}}, False),                           # required inside the $ref
    ({"place": "Paris"}, False),                                     # the $ref's type
    ({"place": {"city": "Paris"}, "unit": "kelvin"}, False),         # the enum behind $ref in anyOf
    ({"place": {"city": "Paris"}, "days": 0}, False),                # exclusiveMinimum
    ({"place": {"city": "Paris"}, "days": 15}, False),               # maximum
    ({"place": {"city": "Paris"}, "days": True}, False),             # a boolean is not an integer
    ({"place": {"city": "Paris"}, "kind": "history"}, False),        # const
    ({"place": {"city": "Paris"}, "hours": 3}, False),               # additionalProperties false
    ({}, False),
]


@pytest.mark.parametrize("value, ok", WEATHER_ARGUMENTS)
def test_pydantic_schema_checked_like_its_flattened_equivalent(value, ok):
    for schema in (PYDANTIC_WEATHER, FLAT_WEATHER):
        check.check_schema(schema)
        errors = check.schema_errors(value, schema, "arguments")
        assert (errors == []) is ok, (schema.get("title"), errors)


def test_anyof_error_says_why_each_alternative_failed():
    errors = check.schema_errors({"place": {"city": "Paris"}, "unit": "kelvin"}, PYDANTIC_WEATHER, "arguments")
    assert errors == ["arguments.unit: 'kelvin' is not valid under any of the given schemas "
                      "('kelvin' is not one of ['celsius', 'fahrenheit']; 'kelvin' is not of type 'null')"]


# An MCP server's tool (inputSchema as the TypeScript SDK's zod-to-json-schema writes it).
MCP_SEARCH = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 3},
        "limit": {"type": "number", "exclusiveMinimum": 0, "maximum": 50, "default": 10},
        "filters": {"type": "object", "properties": {"lang": {"type": "string", "pattern": "^[a-z]{2}$"}},
                    "additionalProperties": False},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("value, ok", [
    ({"query": "vllm"}, True),
    ({"query": "vllm", "limit": 0.5, "filters": {"lang": "en"}}, True),
    ({"query": "ab"}, False),
    ({"query": "vllm", "limit": 0}, False),
    ({"query": "vllm", "filters": {"lang": "eng"}}, False),
])
def test_mcp_schema_with_its_own_draft(value, ok):
    check.check_schema(MCP_SEARCH)
    assert (check.schema_errors(value, MCP_SEARCH) == []) is ok


@pytest.mark.parametrize("schema, words", [
    ({"type": "object", "properties": {"a": {"type": "string", "requried": True}}},
     "parameters.properties.a: 'requried' is not a JSON Schema keyword"),
    ({"type": "object", "properties": {"a": {"type": "string", "nullable": True}}}, "'nullable' is not a JSON Schema keyword"),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"typ": "null"}]}}},
     "parameters.properties.a.anyOf[1]: 'typ'"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}, "$ref \"#/$defs/Missing\" is not a reference into"),
    ({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}, "fetches nothing"),
    ({"type": "dict"}, "not a valid JSON Schema"),
    ({"type": "array", "items": {"type": "float"}}, "parameters.items.type: not a valid JSON Schema"),
    ({"type": "object", "required": "a"}, "parameters.required: not a valid JSON Schema"),
    (["not", "a", "mapping"], "a schema must be a mapping"),
])
def test_schemas_the_gate_would_not_check_in_full_are_refused(schema, words):
    with pytest.raises(check.SchemaError) as raised:
        check.check_schema(schema)
    assert words in str(raised.value)


def test_annotations_and_extensions_are_accepted():
    check.check_schema({"type": "object", "title": "T", "x-origin": "openapi", "discriminator": {"propertyName": "k"},
                        "properties": {"k": {"type": "string", "examples": ["a"], "deprecated": True}},
                        "if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["k"]}, "else": True})


# --- expected values ----------------------------------------------------------

@pytest.mark.parametrize("actual, expected, ok", [
    ({"city": "Paris"}, {"city": "paris"}, True),                       # case-insensitive
    ({"city": "New York"}, {"city": "new-york"}, True),                 # BFCL: spaces and - ignored
    ({"city": "Paris"}, {"city": "Lyon"}, False),
    ({"city": "Paris", "unit": "celsius"}, {"city": "Paris"}, False),   # a key the case does not list
    ({"city": "Paris"}, {"city": "Paris", "unit": {"$optional": "celsius"}}, True),
    ({"city": "Paris", "unit": "celsius"}, {"city": "Paris", "unit": {"$optional": "celsius"}}, True),
    ({"city": "Paris", "unit": "kelvin"}, {"city": "Paris", "unit": {"$optional": "celsius"}}, False),
    ({"city": "Paris", "unit": "kelvin"}, {"city": "Paris", "unit": {"$optional": {"$any": True}}}, True),
    ({"city": "Paris"}, {"city": "Paris", "unit": {"$any": True}}, False),
    ({"city": "Paris", "unit": "x"}, {"city": "Paris", "unit": {"$absent": True}}, False),
    ({"city": "Paris, France"}, {"city": {"$contains": "paris"}}, True),
    ({"city": "Lyon"}, {"city": {"$contains": "paris"}}, False),
    ({"n": 5.0}, {"n": 5}, True),
    ({"n": True}, {"n": 1}, False),
    ({"n": 1}, {"n": True}, False),
    ({"n": "5"}, {"n": 5}, False),
    ({"n": None}, {"n": None}, True),
    ({"d": "01/28/2021"}, {"d": {"$one_of": ["2021-01-28", "01/28/2021"]}}, True),
    ({}, {"d": {"$one_of": ["x", {"$absent": True}]}}, True),
    ({"to": ["b@x", "a@x"]}, {"to": {"$unordered": ["a@x", "b@x"]}}, True),
    ({"to": ["b@x", "a@x"]}, {"to": ["a@x", "b@x"]}, False),            # plain arrays keep their order
    ({"to": ["a@x"]}, {"to": {"$unordered": ["a@x", "b@x"]}}, False),
    ({"o": {"name": "Dana", "team": "web"}}, {"o": {"name": "dana", "team": "web"}}, True),
    ({"o": {"name": "Dana"}}, {"o": {"name": "Dana", "team": "web"}}, False),
    ({"o": "Dana"}, {"o": {"name": "Dana"}}, False),
])
def test_value_errors(actual, expected, ok):
    errors = check.value_errors(actual, expected)
    assert (errors == []) is ok, errors


@pytest.mark.parametrize("expected, words", [
    ({"a": {"$maybe": 1}}, "unknown matcher '$maybe'"),
    ({"a": {"$one_of": "x"}}, "$one_of takes a list"),
    ({"a": {"$contains": 5}}, "$contains takes a string"),
    ({"a": {"$any": "yes"}}, "write $any: true"),
])
def test_bad_matchers(expected, words):
    with pytest.raises(check.SuiteError) as raised:
        check.check_expected(expected)
    assert words in str(raised.value)


# --- reading answers ----------------------------------------------------------

def test_parse_completion_and_stream_agree():
    calls = [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_stock_price", {"symbol": "NVDA"})]
    plain = check.parse_completion(completion(calls))
    streamed = check.parse_stream(sse(calls, fragment=3))
    assert plain.finish_reason == streamed.finish_reason == "tool_calls"
    assert plain.calls() == streamed.calls() == list(calls)
    assert streamed.tool_calls[0]["id"] == "chatcmpl-tool-%032x" % 0 and streamed.tool_calls[1]["type"] == "function"
    assert check.stream_mismatch(plain, streamed) is None


def test_parse_stream_text_and_interleaved_indexes():
    lines = sse(content="Paris is the capital.", fragment=4)
    reply = check.parse_stream(lines)
    assert reply.content == "Paris is the capital." and reply.tool_calls == [] and reply.finish_reason == "stop"
    # Fragments of two calls may interleave; they are gathered per index.
    chunks = [
        {"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "get_stock_price", "arguments": "{\"sym"}}]},
        {"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\""}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "bol\": \"AAPL\"}"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ": \"Rome\"}"}}]},
    ]
    lines = ["data: " + json.dumps({"choices": [{"index": 0, "delta": d, "finish_reason": None}]}) for d in chunks]
    lines += ["data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}), "data: [DONE]"]
    reply = check.parse_stream(lines)
    assert reply.calls() == [("get_weather", {"city": "Rome"}), ("get_stock_price", {"symbol": "AAPL"})]


@pytest.mark.parametrize("lines, words", [
    (sse([("get_weather", {"city": "Paris"})], done=False), "ended without data: [DONE]"),
    (["data: {not json", "data: [DONE]"], "an event is not JSON"),
    (['data: {"object": "error", "message": "boom", "code": 500}', "data: [DONE]"], "the stream sent an error"),
    (['data: {"error": {"message": "engine dead"}}', "data: [DONE]"], "engine dead"),
])
def test_broken_streams(lines, words):
    reply = check.parse_stream(lines)
    assert words in reply.error
    assert check.reply_errors(reply, call_case([{"name": "get_weather", "arguments": {"city": "Paris"}}]), OFFERED) == [reply.error]


def test_parse_completion_without_choice():
    assert check.parse_completion({"object": "error", "message": "x"}).error


# --- the rules ------------------------------------------------------------------

PARIS = [{"name": "get_weather", "arguments": {"city": "Paris", "unit": {"$optional": "celsius"}}}]


def test_proper_call_passes():
    assert errors_for(completion([("get_weather", {"city": "Paris"})]), call_case(PARIS)) == []
    assert errors_for(completion([("get_weather", '{"city": "paris", "unit": "celsius"}')]), call_case(PARIS)) == []


def test_call_in_content_fails():
    """The acceptance case of issue 9: the call written as text in content is not a tool call."""
    body = completion(content=CALL_IN_CONTENT, finish_reason="stop")
    errors = errors_for(body, call_case(PARIS))
    assert errors[0] == "finish_reason is stop, expected tool_calls"
    assert errors[1].startswith("the tool call is in content, not in tool_calls: ")
    # Even with finish_reason tool_calls the call must be in tool_calls.
    body = completion(content=CALL_IN_CONTENT, finish_reason="tool_calls")
    assert errors_for(body, call_case(PARIS))[0].startswith("the tool call is in content")


@pytest.mark.parametrize("content, left", [
    (None, False),
    ("", False),
    ("Let me look that up.", False),                       # prose beside the calls is fine
    (CALL_IN_CONTENT, True),                               # the parser took the call and left its text too
    ("</tool_call>", True),                                # a closing tag left behind
    ('<function=get_weather>{"city": "Paris"}</function>', True),
    ('{"name": "get_weather", "arguments": {"city": "Paris"}}', True),
])
def test_markup_left_in_content_beside_valid_tool_calls_fails(content, left):
    """Issue 23: valid tool_calls AND tool-call markup left in content fail, streamed or not."""
    calls = [("get_weather", {"city": "Paris"})]
    for reply in (check.parse_completion(completion(calls, content=content)), check.parse_stream(sse(calls, content=content))):
        errors = check.reply_errors(reply, call_case(PARIS), OFFERED)
        if left:
            assert errors == ["tool-call markup left in content beside the tool_calls: %s" % json.dumps(content)]
        else:
            assert errors == []


@pytest.mark.parametrize("calls, finish, words", [
    ([("get_weather", {"city": "Paris"})], "stop", "finish_reason is stop, expected tool_calls"),
    ([("get_wether", {"city": "Paris"})], None, "the request offered no tool of that name"),
    ([("get_weather", '{"city": "Paris"')], None, "arguments are not valid JSON"),
    ([("get_weather", '["Paris"]')], None, "arguments are not a JSON object"),
    ([("get_weather", {"city": 75001})], None, "does not match the tool's schema: arguments.city: 75001 is not of type 'string'"),
    ([("get_weather", {"city": "Paris", "unit": "kelvin"})], None, "is not one of"),
    ([("get_weather", {"city": "Lyon"})], None, "get_weather: arguments.city: expected \"Paris\", got \"Lyon\""),
    ([("get_stock_price", {"symbol": "NVDA"})], None, "no call of get_weather (got get_stock_price)"),
    ([("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Paris"})], None, "expected 1 call(s) get_weather, got 2"),
    ([], "stop", "no tool call (content: null)"),
])
def test_wrong_calls_fail(calls, finish, words):
    errors = errors_for(completion(calls, finish_reason=finish), call_case(PARIS))
    assert any(words in e for e in errors), errors


def test_parallel_calls_in_any_order():
    case = call_case([{"name": "get_weather", "arguments": {"city": "Paris"}},
                      {"name": "get_weather", "arguments": {"city": "Tokyo"}},
                      {"name": "get_stock_price", "arguments": {"symbol": "AAPL"}}])
    body = completion([("get_stock_price", {"symbol": "AAPL"}), ("get_weather", {"city": "Tokyo"}),
                       ("get_weather", {"city": "Paris"})])
    assert errors_for(body, case) == []
    body = completion([("get_stock_price", {"symbol": "AAPL"}), ("get_weather", {"city": "Tokyo"}),
                       ("get_weather", {"city": "Tokyo"})])
    assert errors_for(body, case) == ['get_weather: arguments.city: expected "Paris", got "Tokyo"']


TEXT_CASE = {"id": "t", "category": "no_tool", "prompt": "p", "tools": ["get_weather"],
             "expect": {"text": True, "content_contains": ["Paris"]}}


@pytest.mark.parametrize("body, errors", [
    (completion(content="The capital of France is Paris."), []),
    (completion(content="Paris", finish_reason="length"), []),
    (completion(content="Lyon."), ["the answer does not contain 'Paris'"]),
    (completion(content=""), ["the text answer is empty", "the answer does not contain 'Paris'"]),
    (completion([("get_weather", {"city": "Paris"})]),
     ['expected a text answer, got tool calls [["get_weather", {"city": "Paris"}]]',
      "finish_reason is tool_calls, expected stop", "the text answer is empty", "the answer does not contain 'Paris'"]),
    (completion(content=CALL_IN_CONTENT, finish_reason="stop"),
     ["the answer holds a tool call written as text in content: " + json.dumps(CALL_IN_CONTENT)]),
])
def test_text_cases(body, errors):
    assert errors_for(body, TEXT_CASE) == errors


def test_stream_mismatch():
    plain = check.parse_completion(completion([("get_weather", {"city": "Paris"})]))
    streamed = check.parse_stream(sse([("get_weather", {"city": "Paris", "unit": "celsius"})]))
    assert "differ from the non-streamed calls" in check.stream_mismatch(plain, streamed)
    # Key order and whitespace inside the JSON do not matter; values do.
    streamed = check.parse_stream(sse([("get_weather", '{ "city" :"Paris" }')]))
    assert check.stream_mismatch(plain, streamed) is None


@pytest.mark.parametrize("content, found", [
    (CALL_IN_CONTENT, True),                                                   # xlam / hermes markup
    ('<function=get_weather>{"city": "Paris"}</function>', True),              # llama 3 style
    ('[TOOL_CALLS][{"name": "get_weather", "arguments": {}}]', True),          # mistral
    ('{"name": "get_weather", "parameters": {"city": "Paris"}}', True),        # bare JSON
    ("The capital of France is Paris.", False),
    ('Use a JSON like {"name": "x"} to name things.', False),                  # a name alone is no call
])
def test_looks_like_call(content, found):
    assert check.looks_like_call(content) is found


@pytest.mark.parametrize("body, words", [
    ({"choices": [{"message": None, "finish_reason": "stop"}]}, "message is not an object"),
    ({"choices": [{"message": {"tool_calls": ["get_weather"]}, "finish_reason": "tool_calls"}]}, "tool_calls[0] is not an object"),
    ({"choices": []}, "not a chat completion with a choice"),
])
def test_malformed_completions(body, words):
    assert words in check.parse_completion(body).error


@pytest.mark.parametrize("lines, words", [
    (['data: {"choices": ["x"]}', "data: [DONE]"], "choice is not an object with a delta"),
    (['data: {"choices": [{"delta": {"tool_calls": ["x"]}}]}', "data: [DONE]"], "tool_calls delta is not an object"),
    (["data: [1, 2]", "data: [DONE]"], "not a JSON object"),
])
def test_malformed_streams(lines, words):
    assert words in check.parse_stream(lines).error
