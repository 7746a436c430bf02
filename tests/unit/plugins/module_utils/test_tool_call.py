# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_tool_call.py: the scoring rules, without HTTP.

The answers below are shaped like vLLM's OpenAI-compatible server's (field names,
nulls, how a streamed tool call arrives in fragments, the usage chunk with no
choices, ``data: [DONE]``). They test the scoring of those shapes, not vLLM: the
lab runs the suite against real vLLM.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import threading
import time

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_call as tc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
DEFAULT_SUITE = os.path.join(ROOT, "roles", "tool_gate", "files", "suites", "default.yml")


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
    return tc.reply_errors(tc.parse_completion(body), case, tc.case_tools(case, TOOLS))


# --- JSON Schema subset -------------------------------------------------------

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


@pytest.mark.parametrize("value, ok", [
    ({"title": "a", "priority": "low"}, True),
    ({"title": "a", "priority": "low", "count": 3, "ratio": 0.5, "flag": True, "tags": ["x"],
      "owner": {"name": "Dana"}, "maybe": None, "extra": 1}, True),
    ({"title": "a", "priority": "low", "count": 3.0}, True),      # 3.0 is an integer in JSON Schema
    ({"title": "a", "priority": "low", "ratio": 2}, True),        # an integer is a number
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
def test_schema_subset_agrees_with_jsonschema(value, ok):
    errors = tc.schema_errors(value, SCHEMA)
    assert (errors == []) is ok, errors
    # The controller's venv carries jsonschema (ansible-lint needs it): the subset
    # checker must say what the reference implementation says.
    jsonschema = pytest.importorskip("jsonschema")
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(value) is ok


def test_schema_errors_name_the_place():
    errors = tc.schema_errors({"title": "a", "priority": "low", "owner": {"name": 3}}, SCHEMA, "arguments")
    assert errors == ["arguments.owner.name: expected string, got integer"]
    errors = tc.schema_errors({"priority": "urgent"}, SCHEMA, "arguments")
    assert "arguments: required property 'title' is missing" in errors
    assert 'arguments.priority: "urgent" is not one of ["low", "high"]' in errors


@pytest.mark.parametrize("schema, words", [
    ({"type": "object", "anyOf": [{}]}, "keyword 'anyOf' is not supported"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}, "parameters.properties.a: keyword 'pattern'"),
    ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "keyword '$ref'"),
    ({"type": "dict"}, "unknown type 'dict'"),
    ({"type": "array", "items": {"type": "float"}}, "parameters.items: unknown type 'float'"),
    ({"type": "object", "required": "a"}, "required must be a list"),
])
def test_unsupported_schemas_are_refused(schema, words):
    with pytest.raises(tc.SchemaError, match=None) as raised:
        tc.check_schema_supported(schema)
    assert words in str(raised.value)


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
    errors = tc.value_errors(actual, expected)
    assert (errors == []) is ok, errors


@pytest.mark.parametrize("expected, words", [
    ({"a": {"$maybe": 1}}, "unknown matcher '$maybe'"),
    ({"a": {"$one_of": "x"}}, "$one_of takes a list"),
    ({"a": {"$contains": 5}}, "$contains takes a string"),
    ({"a": {"$any": "yes"}}, "write $any: true"),
])
def test_bad_matchers(expected, words):
    with pytest.raises(tc.SuiteError) as raised:
        tc.check_expected(expected)
    assert words in str(raised.value)


# --- reading answers ----------------------------------------------------------

def test_parse_completion_and_stream_agree():
    calls = [("get_weather", {"city": "Paris", "unit": "celsius"}), ("get_stock_price", {"symbol": "NVDA"})]
    plain = tc.parse_completion(completion(calls))
    streamed = tc.parse_stream(sse(calls, fragment=3))
    assert plain.finish_reason == streamed.finish_reason == "tool_calls"
    assert plain.calls() == streamed.calls() == list(calls)
    assert streamed.tool_calls[0]["id"] == "chatcmpl-tool-%032x" % 0 and streamed.tool_calls[1]["type"] == "function"
    assert tc.stream_mismatch(plain, streamed) is None


def test_parse_stream_text_and_interleaved_indexes():
    lines = sse(content="Paris is the capital.", fragment=4)
    reply = tc.parse_stream(lines)
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
    reply = tc.parse_stream(lines)
    assert reply.calls() == [("get_weather", {"city": "Rome"}), ("get_stock_price", {"symbol": "AAPL"})]


@pytest.mark.parametrize("lines, words", [
    (sse([("get_weather", {"city": "Paris"})], done=False), "ended without data: [DONE]"),
    (["data: {not json", "data: [DONE]"], "an event is not JSON"),
    (['data: {"object": "error", "message": "boom", "code": 500}', "data: [DONE]"], "the stream sent an error"),
    (['data: {"error": {"message": "engine dead"}}', "data: [DONE]"], "engine dead"),
])
def test_broken_streams(lines, words):
    reply = tc.parse_stream(lines)
    assert words in reply.error
    assert tc.reply_errors(reply, call_case([{"name": "get_weather", "arguments": {"city": "Paris"}}]), OFFERED) == [reply.error]


def test_parse_completion_without_choice():
    assert tc.parse_completion({"object": "error", "message": "x"}).error


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


@pytest.mark.parametrize("calls, finish, words", [
    ([("get_weather", {"city": "Paris"})], "stop", "finish_reason is stop, expected tool_calls"),
    ([("get_wether", {"city": "Paris"})], None, "the request offered no tool of that name"),
    ([("get_weather", '{"city": "Paris"')], None, "arguments are not valid JSON"),
    ([("get_weather", '["Paris"]')], None, "arguments are not a JSON object"),
    ([("get_weather", {"city": 75001})], None, "does not match the tool's schema: arguments.city: expected string, got integer"),
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
    plain = tc.parse_completion(completion([("get_weather", {"city": "Paris"})]))
    streamed = tc.parse_stream(sse([("get_weather", {"city": "Paris", "unit": "celsius"})]))
    assert "differ from the non-streamed calls" in tc.stream_mismatch(plain, streamed)
    # Key order and whitespace inside the JSON do not matter; values do.
    streamed = tc.parse_stream(sse([("get_weather", '{ "city" :"Paris" }')]))
    assert tc.stream_mismatch(plain, streamed) is None


# --- suites -----------------------------------------------------------------------

def test_default_suite_is_valid_and_covers_issue_9():
    with open(DEFAULT_SUITE, encoding="utf-8") as handle:
        suite = tc.merge_suites([yaml.safe_load(handle)])
    json.dumps(suite)  # plain data
    cases = {case["id"]: case for case in suite["cases"]}
    categories = {case["category"] for case in suite["cases"]}
    assert {"single", "choose", "parallel", "no_tool", "multi_turn", "tool_choice", "auto"} <= categories

    # Typed arguments across the single-call cases: string, integer, enum, nested object, array.
    def types(schema):
        found = {schema.get("type")}
        if "enum" in schema:
            found.add("enum")
        for sub in schema.get("properties", {}).values():
            found |= types(sub)
        if "items" in schema:
            found |= types(schema["items"])
        return found

    seen = set()
    for case in suite["cases"]:
        if case["category"] == "single":
            for tool in tc.case_tools(case, suite["tools"]):
                seen |= types(tool["parameters"])
    assert {"string", "integer", "enum", "object", "array"} <= seen
    assert any(len(tc.case_tools(c, suite["tools"])) >= 3 for c in suite["cases"] if c["category"] == "choose")
    assert all(len(c["expect"]["calls"]) >= 2 for c in suite["cases"] if c["category"] == "parallel")
    assert all(c["expect"].get("text") for c in suite["cases"] if c["category"] == "no_tool")
    assert all(any(m["role"] == "tool" for m in c["messages"]) for c in suite["cases"] if c["category"] == "multi_turn")
    assert {c.get("tool_choice", "auto") for c in suite["cases"] if c["category"] == "tool_choice"} == {"none", "required"}
    assert cases["single_nested_object"]["expect"]["calls"][0]["arguments"]["assignee"] == {"name": "Dana", "team": "web"}


def test_default_suite_scores_100_with_right_answers():
    """Every case can pass: answers built from the expectations pass, the same answers as text fail."""
    with open(DEFAULT_SUITE, encoding="utf-8") as handle:
        suite = tc.merge_suites([yaml.safe_load(handle)])

    omit = object()

    def pick(expected):
        found = tc._matcher(expected)  # pylint: disable=protected-access
        if found:
            key, arg = found
            if key in ("$optional", "$absent"):
                return omit
            if key == "$one_of":
                return pick(arg[0])
            if key == "$unordered":
                return [pick(a) for a in reversed(arg)]
            return arg  # $contains: the text itself
        if isinstance(expected, dict):
            return {k: v for k, v in ((k, pick(v)) for k, v in expected.items()) if v is not omit}
        return expected

    for case in suite["cases"]:
        offered = tc.case_tools(case, suite["tools"])
        if "calls" in case["expect"]:
            calls = [(c["name"], pick(c.get("arguments", {}))) for c in case["expect"]["calls"]]
            right, wrong = completion(calls), completion(content=json.dumps(calls), finish_reason="stop")
        else:
            right = completion(content="Answer: " + " ".join(case["expect"].get("content_contains", ["ok"])))
            wrong = completion([("get_weather", {"city": "Paris"})])
        assert tc.reply_errors(tc.parse_completion(right), case, offered) == [], case["id"]
        assert tc.reply_errors(tc.parse_completion(wrong), case, offered), case["id"]


@pytest.mark.parametrize("suite, words", [
    ({"tools": {}, "cases": [{"id": "a", "category": "x", "prompt": "p", "expect": {"text": True}},
                             {"id": "a", "category": "x", "prompt": "p", "expect": {"text": True}}]}, "the id is used twice"),
    ({"tools": {}, "cases": [{"id": "a", "category": "x", "expect": {"text": True}}]}, "give either prompt"),
    ({"tools": {}, "cases": [{"id": "a", "category": "x", "prompt": "p", "tools": ["nope"], "expect": {"text": True}}]},
     "tool 'nope' is not defined"),
    ({"tools": TOOLS, "cases": [{"id": "a", "category": "x", "prompt": "p", "tools": ["get_weather"],
                                 "expect": {"calls": [{"name": "get_stock_price"}]}}]}, "is not among the tools offered"),
    ({"tools": TOOLS, "cases": [{"id": "a", "category": "x", "prompt": "p", "tools": ["get_weather"], "tool_choice": "none",
                                 "expect": {"calls": [{"name": "get_weather"}]}}]}, "tool_choice none cannot expect calls"),
    ({"tools": TOOLS, "cases": [{"id": "a", "category": "x", "prompt": "p", "tools": ["get_weather"], "tool_choice": "required",
                                 "expect": {"text": True}}]}, "tool_choice required cannot expect text"),
    ({"tools": TOOLS, "cases": [{"id": "a", "category": "x", "prompt": "p", "tools": ["get_weather"],
                                 "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                                 "expect": {"calls": [{"name": "get_weather"}]}}]}, "a named function is not scored"),
    ({"tools": TOOLS, "cases": [{"id": "a", "category": "x", "prompt": "p", "expect": {}}]}, "expect either calls"),
    ({"tools": {"bad.name": {"parameters": {"type": "object"}}}, "cases": []}, "must be 1-64 letters"),
    ({"tools": {"t": {"parameters": {"type": "object", "oneOf": []}}}, "cases": []}, "keyword 'oneOf' is not supported"),
    ({"tools": {}, "cases": [], "extends": "default"}, "unknown keys extends"),
])
def test_invalid_suites(suite, words):
    with pytest.raises(tc.SuiteError) as raised:
        tc.merge_suites([suite])
    assert words in str(raised.value)


def test_merge_select_and_digest():
    base = {"name": "base", "tools": TOOLS, "cases": [
        {"id": "w1", "category": "single", "prompt": "p", "tools": ["get_weather"], "tool_choice": "required",
         "expect": {"calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}}]}
    mine = {"name": "mine", "tools": {"get_weather": TOOLS["get_weather"]}, "cases": [
        {"id": "t1", "category": "no_tool", "prompt": "hi", "expect": {"text": True}}]}
    suite = tc.merge_suites([base, mine])
    assert suite["name"] == "base+mine" and [c["id"] for c in suite["cases"]] == ["w1", "t1"]
    assert [c["id"] for c in tc.select_cases(suite, ["w*"])] == ["w1"]
    assert [c["id"] for c in tc.select_cases(suite, categories=["no_tool"])] == ["t1"]
    assert tc.select_cases(suite, ["w*"], ["no_tool"]) == []
    settings = {"temperature": 0, "max_tokens": 512, "streaming": True}
    digest = tc.suite_digest(suite["cases"], suite["tools"], settings)
    assert digest == tc.suite_digest(suite["cases"], suite["tools"], dict(settings))
    assert digest != tc.suite_digest(suite["cases"], suite["tools"], dict(settings, temperature=0.7))
    assert digest != tc.suite_digest(suite["cases"][:1], suite["tools"], settings)
    with pytest.raises(tc.SuiteError, match="defined twice, differently"):
        tc.merge_suites([base, {"tools": {"get_weather": {"parameters": {"type": "object"}}}, "cases": []}])


def test_build_request():
    case = {"id": "m", "category": "multi_turn", "tools": ["get_weather"], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"}], "expect": {"text": True}}
    body = tc.build_request(case, TOOLS, "lab-chat", 0.0, 256, True)
    assert body["model"] == "lab-chat" and body["stream"] is True and body["max_tokens"] == 256
    assert body["tool_choice"] == "auto"
    assert body["tools"] == [{"type": "function", "function": WEATHER}]
    call = body["messages"][1]["tool_calls"][0]
    assert call == {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    assert case["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}  # the suite is untouched
    plain = tc.build_request({"id": "p", "category": "x", "prompt": "hi", "max_tokens": 9, "expect": {"text": True}},
                             {}, "m", 0.0, 256, False)
    assert "tools" not in plain and "tool_choice" not in plain and plain["max_tokens"] == 9
    assert plain["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("url, base", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"),
    ("https://spark-a:8000/", "https://spark-a:8000"),
])
def test_normalize_url(url, base):
    assert tc.normalize_url(url) == base


def test_score():
    results = [{"id": "a", "category": "x", "passed": True, "latency": 1.0},
               {"id": "b", "category": "x", "passed": False, "latency": 3.0},
               {"id": "c", "category": "y", "passed": True, "latency": None}]
    summary = tc.score(results)
    assert summary["score"] == 66.7 and summary["total"] == 3 and summary["passed_count"] == 2
    assert summary["by_category"] == {"x": {"total": 2, "passed": 1, "score": 50.0}, "y": {"total": 1, "passed": 1, "score": 100.0}}
    assert summary["latency_mean"] == 2.0 and summary["latency_max"] == 3.0
    assert tc.score([])["score"] == 0.0


# --- BFCL ---------------------------------------------------------------------------

BFCL_TRIANGLE = "Find the area of a triangle with a base of 10 units and height of 5 units."
BFCL_FACTORIAL = "Calculate the factorial of 5 using math functions."
BFCL_SPOTIFY = ("Play songs from the artists Taylor Swift and Maroon 5, with a play time of 20 minutes and 15 minutes "
                "respectively, on Spotify.")
BFCL_IRRELEVANT = "Calculate the area of a triangle given the base is 10 meters and height is 5 meters."


def write_bfcl(root, version=4):
    """A few entries in bfcl-eval's own layout and format (JSON lines), copied from its data."""
    data = root / "data"
    (data / "possible_answer").mkdir(parents=True)
    simple = [{"id": "simple_python_0", "question": [[{"role": "user", "content": BFCL_TRIANGLE}]],
               "function": [{"name": "calculate_triangle_area", "description": "Calculate the area of a triangle given its base and height.",
                             "parameters": {"type": "dict", "properties": {"base": {"type": "integer", "description": "The base of the triangle."},
                                                                           "height": {"type": "integer", "description": "The height of the triangle."},
                                                                           "unit": {"type": "string", "description": "The unit of measure."}},
                                            "required": ["base", "height"]}}]},
              {"id": "simple_python_1", "question": [[{"role": "user", "content": BFCL_FACTORIAL}]],
               "function": [{"name": "math.factorial", "description": "Calculate the factorial of a given number.",
                             "parameters": {"type": "dict", "properties": {"number": {"type": "integer", "description": "The number."}},
                                            "required": ["number"]}}]}]
    simple_answers = [{"id": "simple_python_0",
                       "ground_truth": [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]},
                      {"id": "simple_python_1", "ground_truth": [{"math.factorial": {"number": [5]}}]}]
    parallel = [{"id": "parallel_0", "question": [[{"role": "user", "content": BFCL_SPOTIFY}]],
                 "function": [{"name": "spotify.play", "description": "Play specific tracks from a given artist for a specific time duration.",
                               "parameters": {"type": "dict", "properties": {"artist": {"type": "string", "description": "The artist."},
                                                                             "duration": {"type": "integer", "description": "Minutes."}},
                                              "required": ["artist", "duration"]}}]}]
    parallel_answers = [{"id": "parallel_0", "ground_truth": [{"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
                                                              {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}}]}]
    irrelevance = [{"id": "irrelevance_0", "question": [[{"role": "user", "content": BFCL_IRRELEVANT}]],
                    "function": [{"name": "determine_body_mass_index", "description": "Calculate body mass index given weight and height.",
                                  "parameters": {"type": "dict", "properties": {"weight": {"type": "float", "description": "kg"},
                                                                                "height": {"type": "float", "description": "m"}},
                                                 "required": ["weight", "height"]}}]}]
    stem = "simple_python" if version >= 4 else "simple"
    files = {"BFCL_v%d_%s.json" % (version, stem): simple, "possible_answer/BFCL_v%d_%s.json" % (version, stem): simple_answers,
             "BFCL_v%d_parallel.json" % version: parallel, "possible_answer/BFCL_v%d_parallel.json" % version: parallel_answers,
             "BFCL_v%d_irrelevance.json" % version: irrelevance,
             # Live categories share the suffix; they must not be picked for "parallel".
             "BFCL_v%d_live_parallel.json" % version: [], "possible_answer/BFCL_v%d_live_parallel.json" % version: []}
    for name, rows in files.items():
        (data / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(data)


@pytest.mark.parametrize("version", [3, 4])
def test_load_bfcl(tmp_path, version):
    data = write_bfcl(tmp_path, version)
    suite = tc.merge_suites([tc.load_bfcl(data, ["simple", "parallel", "irrelevance"], tool_choice="required")])
    cases = {case["id"]: case for case in suite["cases"]}
    assert list(cases) == ["bfcl_simple_python_0", "bfcl_simple_python_1", "bfcl_parallel_0", "bfcl_irrelevance_0"]
    first = cases["bfcl_simple_python_0"]
    assert first["category"] == "bfcl_simple" and first["tool_choice"] == "required"
    assert first["tools"][0]["parameters"]["type"] == "object"
    assert first["expect"]["calls"] == [{"name": "calculate_triangle_area",
                                         "arguments": {"base": 10, "height": 5, "unit": {"$optional": "units"}}}]
    assert cases["bfcl_simple_python_1"]["tools"][0]["name"] == "math_factorial"
    assert cases["bfcl_simple_python_1"]["expect"]["calls"][0]["name"] == "math_factorial"
    assert len(cases["bfcl_parallel_0"]["expect"]["calls"]) == 2
    irrelevant = cases["bfcl_irrelevance_0"]
    assert irrelevant["expect"] == {"text": True} and irrelevant["tool_choice"] == "auto"
    assert irrelevant["tools"][0]["parameters"]["properties"]["weight"]["type"] == "number"

    # Scored with the same rules: BFCL's own answer passes, a wrong one fails.
    offered = tc.case_tools(first, suite["tools"])
    right = tc.parse_completion(completion([("calculate_triangle_area", {"base": 10, "height": 5})]))
    wrong = tc.parse_completion(completion([("calculate_triangle_area", {"base": 5, "height": 10})]))
    assert tc.reply_errors(right, first, offered) == []
    assert tc.reply_errors(wrong, first, offered)
    parallel = cases["bfcl_parallel_0"]
    both = tc.parse_completion(completion([("spotify_play", {"artist": "maroon 5", "duration": 15}),
                                           ("spotify_play", {"artist": "Taylor Swift", "duration": 20})]))
    assert tc.reply_errors(both, parallel, tc.case_tools(parallel, suite["tools"])) == []

    limited = tc.load_bfcl(data, ["simple"], limit=1)
    assert [c["id"] for c in limited["cases"]] == ["bfcl_simple_python_0"] and limited["cases"][0]["tool_choice"] == "auto"


@pytest.mark.parametrize("categories, words", [
    (["multiple"], "no BFCL_v*_multiple.json under"),
    (["live_simple"], "unknown BFCL category 'live_simple'"),
])
def test_load_bfcl_errors(tmp_path, categories, words):
    data = write_bfcl(tmp_path)
    with pytest.raises(tc.SuiteError) as raised:
        tc.load_bfcl(data, categories)
    assert words in str(raised.value)
    with pytest.raises(tc.SuiteError, match="is not a directory"):
        tc.load_bfcl(str(tmp_path / "nowhere"), ["simple"])


def test_bfcl_expected():
    assert tc.bfcl_expected([5]) == 5
    assert tc.bfcl_expected(["2021-01-28", "01/28/2021"]) == {"$one_of": ["2021-01-28", "01/28/2021"]}
    assert tc.bfcl_expected(["", 0]) == {"$optional": 0}
    assert tc.bfcl_expected([""]) == {"$absent": True}
    assert tc.bfcl_expected([[3, 4]]) == [3, 4]
    assert tc.bfcl_expected([{"city": ["Paris"], "zip": ["", "75001"]}]) == {"city": "Paris", "zip": {"$optional": "75001"}}
    assert tc.bfcl_schema({"type": "dict", "properties": {"x": {"type": "any"}, "y": {"type": "tuple", "items": {"type": "float"}},
                                                          "z": {"type": "string", "optional": True, "default": "a"}}}) == {
        "type": "object", "properties": {"x": {}, "y": {"type": "array", "items": {"type": "number"}},
                                         "z": {"type": "string", "default": "a"}}}


@pytest.mark.parametrize("content, found", [
    (CALL_IN_CONTENT, True),                                                   # xlam / hermes markup
    ('<function=get_weather>{"city": "Paris"}</function>', True),              # llama 3 style
    ('[TOOL_CALLS][{"name": "get_weather", "arguments": {}}]', True),          # mistral
    ('{"name": "get_weather", "parameters": {"city": "Paris"}}', True),        # bare JSON
    ("The capital of France is Paris.", False),
    ('Use a JSON like {"name": "x"} to name things.', False),                  # a name alone is no call
])
def test_looks_like_call(content, found):
    assert tc.looks_like_call(content) is found


@pytest.mark.parametrize("body, words", [
    ({"choices": [{"message": None, "finish_reason": "stop"}]}, "message is not an object"),
    ({"choices": [{"message": {"tool_calls": ["get_weather"]}, "finish_reason": "tool_calls"}]}, "tool_calls[0] is not an object"),
    ({"choices": []}, "not a chat completion with a choice"),
])
def test_malformed_completions(body, words):
    assert words in tc.parse_completion(body).error


@pytest.mark.parametrize("lines, words", [
    (['data: {"choices": ["x"]}', "data: [DONE]"], "choice is not an object with a delta"),
    (['data: {"choices": [{"delta": {"tool_calls": ["x"]}}]}', "data: [DONE]"], "tool_calls delta is not an object"),
    (["data: [1, 2]", "data: [DONE]"], "not a JSON object"),
])
def test_malformed_streams(lines, words):
    assert words in tc.parse_stream(lines).error


# --- Running a suite, one case at a time or several at once ------------------------

class FakeResponse:
    """What requests.Session.post returns, as far as tc.post reads it."""

    def __init__(self, status, payload=None, lines=None):
        self.status_code = status
        self.content = json.dumps(payload).encode("utf-8") if payload is not None else b""
        self._lines = lines or []

    def iter_lines(self):
        for line in self._lines:
            yield line.encode("utf-8")

    def close(self):
        pass


class FakeEngine:
    """A server behind fake sessions, counting the requests in flight at once.

    ``answer(body)`` -> (status, calls, content, finish_reason). ``hold(body)``, when
    set, runs while the request is in flight (a sleep stands for generation time, a
    barrier waits for other requests to arrive). :meth:`session` is the
    ``session_factory``; every session records the threads that used it.
    """

    def __init__(self, answer, hold=None):
        self.answer = answer
        self.hold = hold
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.bodies = []
        self.sessions = []

    def session(self):
        session = FakeSession(self)
        with self.lock:
            self.sessions.append(session)
        return session


class FakeSession:
    def __init__(self, engine):
        self.engine = engine
        self.threads = set()
        self.closed = False

    def post(self, url, **kwargs):
        engine, body = self.engine, kwargs["json"]
        self.threads.add(threading.get_ident())
        with engine.lock:
            engine.in_flight += 1
            engine.peak = max(engine.peak, engine.in_flight)
            engine.bodies.append(body)
        try:
            if engine.hold is not None:
                engine.hold(body)
            status, calls, content, finish = engine.answer(body)
        finally:
            with engine.lock:
                engine.in_flight -= 1
        if status != 200:
            return FakeResponse(status, {"object": "error", "message": "no", "code": status})
        if kwargs["stream"]:
            return FakeResponse(200, lines=sse(calls, content, finish, model=body["model"]))
        return FakeResponse(200, completion(calls, content, finish, model=body["model"]))

    def close(self):
        self.closed = True


CITIES = ["Paris", "Oslo", "Rome", "Lima", "Cairo", "Quito", "Hanoi", "Dakar"]
RUN_CASES = [{"id": "weather_%s" % city.lower(), "category": "single", "prompt": "Weather in %s?" % city,
              "tools": ["get_weather", "get_stock_price"], "tool_choice": "required",
              "expect": {"calls": [{"name": "get_weather", "arguments": {"city": city}}]}} for city in CITIES]


def prompt_of(body):
    return body["messages"][-1]["content"]


def city_answer(body):
    """Right calls for most cities; Oslo's call lands in content, Rome is asked for the wrong city."""
    city = prompt_of(body)[len("Weather in "):-1]
    if city == "Oslo":
        return 200, None, CALL_IN_CONTENT.replace("Paris", "Oslo"), "stop"
    return 200, [("get_weather", {"city": "Milan" if city == "Rome" else city})], None, None


def run_cases(engine, concurrency, cases=RUN_CASES):
    return tc.run_suite("http://127.0.0.1:8000/v1", cases, TOOLS, "lab-chat", concurrency=concurrency,
                        session_factory=engine.session)


def without_latency(results):
    return [{k: v for k, v in r.items() if k not in ("latency", "stream_latency")} for r in results]


def test_concurrent_cases_are_in_flight_at_once_and_score_as_one_at_a_time():
    sequential_engine = FakeEngine(city_answer)
    sequential = run_cases(sequential_engine, 1)
    assert sequential_engine.peak == 1 and len(sequential_engine.sessions) == 1

    # Every non-streamed request waits at a barrier until 4 are in flight: the run
    # only gets through when 4 cases really run at once (8 cases, two rounds).
    barrier = threading.Barrier(4, timeout=10)
    engine = FakeEngine(city_answer, hold=lambda body: None if body["stream"] else barrier.wait())
    concurrent = run_cases(engine, 4)
    assert engine.peak == 4  # 4 at once, never more

    # The suite's order, and the same content as one case at a time.
    assert [r["id"] for r in concurrent] == [case["id"] for case in RUN_CASES]
    assert without_latency(concurrent) == without_latency(sequential)
    assert [r["passed"] for r in concurrent] == [True, False, False, True, True, True, True, True]
    assert all(r["latency"] is not None and r["stream_latency"] is not None for r in concurrent)

    # Each case: its non-streamed request, then its streamed one, asked as one at a time asks them.
    assert sorted(engine.bodies, key=json.dumps) == sorted(sequential_engine.bodies, key=json.dumps)
    for case in RUN_CASES:
        streams = [body["stream"] for body in engine.bodies if prompt_of(body) == case["prompt"]]
        assert streams == [False, True]

    # One session per thread, never shared, all closed.
    assert 2 <= len(engine.sessions) <= 4
    assert all(len(session.threads) == 1 and session.closed for session in engine.sessions)
    assert len(set().union(*(session.threads for session in engine.sessions))) == len(engine.sessions)


def test_the_barrier_holds_when_fewer_run_at_once():
    """The control for the test above: with 3 at once, 4 requests are never in flight together."""
    barrier = threading.Barrier(4, timeout=0.5)
    engine = FakeEngine(city_answer, hold=lambda body: None if body["stream"] else barrier.wait())
    with pytest.raises(threading.BrokenBarrierError):
        run_cases(engine, 3)
    assert engine.peak == 3


def test_four_at_once_take_about_a_quarter_of_the_time():
    """Every request takes 0.1 s: 16 one after another take 1.6 s; 4 cases at once, 2 rounds of 2 requests, 0.4 s.

    The only test here that reads the clock; the barrier tests above prove the concurrency itself.
    """
    timings = {}
    for concurrency in (1, 4):
        engine = FakeEngine(city_answer, hold=lambda body: time.sleep(0.1))
        started = time.monotonic()
        results = run_cases(engine, concurrency)
        timings[concurrency] = time.monotonic() - started
        assert engine.peak == concurrency and len(results) == 8
        assert all(r["latency"] >= 0.1 and r["stream_latency"] >= 0.1 for r in results)  # per case, as before
    assert timings[1] >= 1.6
    assert timings[4] < timings[1] / 2, timings  # about a quarter; half leaves room for a busy test machine


@pytest.mark.parametrize("concurrency", [1, 4])
def test_abort_stops_the_run_with_the_first_abort_in_suite_order(concurrency):
    """Case 3 answers 404 and case 5 401: both runs raise case 3's abort, as one case at a time does, and stop early."""
    cases = RUN_CASES + [dict(case, id=case["id"] + "_again") for case in RUN_CASES]
    lima_answered = threading.Event()

    def answer(body):
        city = prompt_of(body)[len("Weather in "):-1]
        if city == "Lima":
            lima_answered.set()
            return 404, None, None, None
        return (401, None, None, None) if city == "Quito" else city_answer(body)

    # With 4 at once, cases 0-2 are still in flight when case 3 aborts; case 5 may abort too.
    def hold(body):
        if concurrency > 1 and prompt_of(body) != "Weather in Lima?":
            lima_answered.wait(5)

    engine = FakeEngine(answer, hold=hold)
    with pytest.raises(tc.AbortRun) as aborted:
        run_cases(engine, concurrency, cases)
    assert str(aborted.value).startswith("POST http://127.0.0.1:8000/v1/chat/completions answered HTTP 404 "
                                         "(wrong URL, or the server does not serve model 'lab-chat')")
    asked = [(prompt_of(body), body["stream"]) for body in engine.bodies]
    for case in cases[:3]:  # the cases before the abort ran in full
        assert (case["prompt"], False) in asked and (case["prompt"], True) in asked
    if concurrency == 1:
        assert len(asked) == 7  # cases 0-2 twice, case 3 once
    assert len(asked) < 2 * len(cases)  # the run stopped
    assert all(session.closed for session in engine.sessions)


class LastFirstExecutor:
    """Stands in for ThreadPoolExecutor and runs the submitted cases last first, when the with block ends."""

    def __init__(self, max_workers=None, thread_name_prefix=""):
        self.tasks = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for future, fn, args in reversed(self.tasks):
            try:
                future.set_result(fn(*args))
            except Exception as exc:  # pylint: disable=broad-except
                future.set_exception(exc)
        return False

    def submit(self, fn, *args):
        future = concurrent.futures.Future()
        self.tasks.append((future, fn, args))
        return future


def test_any_execution_order_gives_the_suite_order_and_the_first_abort(monkeypatch):
    """Whatever order the threads run the cases in, results and aborts are those of one case at a time."""
    monkeypatch.setattr(tc, "ThreadPoolExecutor", LastFirstExecutor)
    engine = FakeEngine(city_answer)
    results = run_cases(engine, 4)
    assert [prompt_of(body) for body in engine.bodies[:2]] == ["Weather in Dakar?"] * 2  # the last case ran first
    assert without_latency(results) == without_latency(run_cases(FakeEngine(city_answer), 1))

    def answer(body):
        status = {"Weather in Lima?": 404, "Weather in Quito?": 401}.get(prompt_of(body))
        return (status, None, None, None) if status else city_answer(body)

    engine = FakeEngine(answer)
    with pytest.raises(tc.AbortRun, match="answered HTTP 404"):  # case 3's, though case 5 aborted first
        run_cases(engine, 4)
    # Cases 7 and 6 ran before anything aborted; case 5 aborted; case 4 still ran, case 3 aborted, and the
    # cases before it ran as they would have one at a time.
    assert [prompt_of(body) for body in engine.bodies] == [
        "Weather in %s?" % city for city in ("Dakar", "Dakar", "Hanoi", "Hanoi", "Quito", "Cairo", "Cairo", "Lima",
                                             "Rome", "Rome", "Oslo", "Oslo", "Paris", "Paris")]


@pytest.mark.parametrize("concurrency", [0, -1, True, 2.0, "4"])
def test_concurrency_below_one_is_refused(concurrency):
    engine = FakeEngine(city_answer)
    with pytest.raises(ValueError, match=r"^concurrency must be 1 \(one case at a time\) or more, got "):
        run_cases(engine, concurrency)
    assert engine.bodies == []


def _verdict(case_id, passed):
    return {"id": case_id, "category": "single", "passed": passed, "reasons": [] if passed else ["wrong"],
            "latency": 1.0}


@pytest.mark.parametrize("verdicts, passed, flipped", [
    ([True], True, False),
    ([False], False, False),
    ([True, False], False, True),  # a tie fails
    ([True, True, False], True, True),
    ([False, True, False], False, True),
    ([True, True, True], True, False),
])
def test_combine_runs_majority(verdicts, passed, flipped):
    runs = [[_verdict("a", v), _verdict("b", True)] for v in verdicts]
    combined = tc.combine_runs(runs)
    first = combined["results"][0]
    assert first["passed"] is passed and first["verdicts"] == verdicts
    assert combined["flipped"] == (["a"] if flipped else [])
    assert combined["results"][1]["passed"] is True
    assert combined["scores"] == [100.0 if v else 50.0 for v in verdicts]


def test_combine_runs_refuses_mismatched_runs():
    with pytest.raises(ValueError, match="different cases at position 0"):
        tc.combine_runs([[_verdict("a", True)], [_verdict("b", True)]])
    with pytest.raises(ValueError, match="one or more runs"):
        tc.combine_runs([])
