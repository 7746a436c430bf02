# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Unit tests for plugins/module_utils/_tool_suite.py: suites, the requests they make, BFCL data."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_check as check
from ansible_collections.factory_floor.llm.plugins.module_utils import _tool_suite as suites
from ansible_collections.factory_floor.llm.tests.unit.plugins.module_utils.test_tool_check import (
    TOOLS,
    WEATHER,
    completion,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
DEFAULT_SUITE = os.path.join(ROOT, "roles", "tool_gate", "files", "suites", "default.yml")
SCHEMAS_SUITE = os.path.join(ROOT, "roles", "tool_gate", "files", "suites", "schemas.yml")


def read_suite(path):
    with open(path, encoding="utf-8") as handle:
        return suites.merge_suites([yaml.safe_load(handle)])


# --- suites -----------------------------------------------------------------------

def test_default_suite_is_valid_and_covers_issue_9():
    with open(DEFAULT_SUITE, encoding="utf-8") as handle:
        suite = suites.merge_suites([yaml.safe_load(handle)])
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
            for tool in suites.case_tools(case, suite["tools"]):
                seen |= types(tool["parameters"])
    assert {"string", "integer", "enum", "object", "array"} <= seen
    assert any(len(suites.case_tools(c, suite["tools"])) >= 3 for c in suite["cases"] if c["category"] == "choose")
    assert all(len(c["expect"]["calls"]) >= 2 for c in suite["cases"] if c["category"] == "parallel")
    assert all(c["expect"].get("text") for c in suite["cases"] if c["category"] == "no_tool")
    assert all(any(m["role"] == "tool" for m in c["messages"]) for c in suite["cases"] if c["category"] == "multi_turn")
    assert {c.get("tool_choice", "auto") for c in suite["cases"] if c["category"] == "tool_choice"} == {"none", "required"}
    assert cases["single_nested_object"]["expect"]["calls"][0]["arguments"]["assignee"] == {"name": "Dana", "team": "web"}


_OMIT = object()


def right_arguments(expected):
    """Arguments built from a case's expectations: the first alternative, optional ones left out."""
    found = check._matcher(expected)  # pylint: disable=protected-access
    if found:
        key, arg = found
        if key in ("$optional", "$absent"):
            return _OMIT
        if key == "$one_of":
            return right_arguments(arg[0])
        if key == "$unordered":
            return [right_arguments(a) for a in reversed(arg)]
        return arg  # $contains: the text itself
    if isinstance(expected, dict):
        return {k: v for k, v in ((k, right_arguments(v)) for k, v in expected.items()) if v is not _OMIT}
    return expected


@pytest.mark.parametrize("path", [DEFAULT_SUITE, SCHEMAS_SUITE])
def test_shipped_suites_score_100_with_right_answers(path):
    """Every case can pass: answers built from the expectations pass, the same answers as text fail."""
    suite = read_suite(path)
    for case in suite["cases"]:
        offered = suites.case_tools(case, suite["tools"])
        if "calls" in case["expect"]:
            calls = [(c["name"], right_arguments(c.get("arguments", {}))) for c in case["expect"]["calls"]]
            right, wrong = completion(calls), completion(content=json.dumps(calls), finish_reason="stop")
        else:
            right = completion(content="Answer: " + " ".join(case["expect"].get("content_contains", ["ok"])))
            wrong = completion([("get_weather", {"city": "Paris"})])
        assert check.reply_errors(check.parse_completion(right), case, offered) == [], case["id"]
        assert check.reply_errors(check.parse_completion(wrong), case, offered), case["id"]


def test_default_suite_digest_is_the_labs():
    """The lab's pass marks (SmolLM2 38.9 = 7/18) and every stored score are keyed by this digest:
    the default suite's cases and tools must not change under it (issue 23 kept them)."""
    suite = read_suite(DEFAULT_SUITE)
    assert len(suite["cases"]) == 18
    lab = {"temperature": 0.0, "max_tokens": 128, "streaming": True}  # inventory/lab: tool_gate_max_tokens 128
    assert suites.suite_digest(suite["cases"], suite["tools"], lab) == (
        "80994320226a8aff52110f012ab21125c949305d58802e0a13fb0b6689ce73b1")


@pytest.mark.parametrize("case_id, arguments, words", [
    ("schema_ref_nested", {"place": {"city": "Paris", "country": "France"}, "days": 3},
     "arguments.place.country: 'France' is not valid under any of the given schemas"),
    ("schema_ref_nested", {"place": {"city": "Paris"}, "days": 0}, "arguments.days: 0 is not valid under any"),
    ("schema_ref_nested", {"place": {"city": "Paris"}, "days": 3, "kind": "history"}, "arguments.kind: 'forecast' was expected"),
    ("schema_enum_behind_ref", {"place": {"city": "Oslo"}, "unit": "F", "days": 5}, "arguments.unit: 'F' is not valid"),
    ("schema_optional_left_out", {"place": {}}, "arguments.place: 'city' is a required property"),
    ("schema_mcp_issue", {"title": "Login fails on Safari", "labels": ["Bug"], "priority": "high",
                          "assignee": {"login": "dana"}}, "arguments.labels[0]: 'Bug' is not one of"),
    ("schema_mcp_issue", {"title": "Login fails on Safari", "labels": ["bug"], "priority": "high",
                          "assignee": {"login": "Dana Novak"}}, "arguments.assignee.login: 'Dana Novak' does not match"),
    ("schema_mcp_minimal", {"title": "Do"}, "arguments.title: 'Do' is too short"),
])
def test_schemas_suite_fails_arguments_its_schemas_refuse(case_id, arguments, words):
    suite = read_suite(SCHEMAS_SUITE)
    case = next(c for c in suite["cases"] if c["id"] == case_id)
    reply = check.parse_completion(completion([(case["expect"]["calls"][0]["name"], arguments)]))
    errors = check.reply_errors(reply, case, suites.case_tools(case, suite["tools"]))
    assert any("does not match the tool's schema" in e and words in e for e in errors), errors


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
    ({"tools": {"t": {"parameters": {"type": "object", "requierd": ["a"]}}}, "cases": []},
     "tool t.parameters: 'requierd' is not a JSON Schema keyword"),
    ({"tools": {"t": {"parameters": {"type": "object", "oneOf": []}}}, "cases": []},
     "tool t.parameters.oneOf: not a valid JSON Schema"),
    ({"tools": {}, "cases": [], "extends": "default"}, "unknown keys extends"),
])
def test_invalid_suites(suite, words):
    with pytest.raises(check.SuiteError) as raised:
        suites.merge_suites([suite])
    assert words in str(raised.value)


def test_merge_select_and_digest():
    base = {"name": "base", "tools": TOOLS, "cases": [
        {"id": "w1", "category": "single", "prompt": "p", "tools": ["get_weather"], "tool_choice": "required",
         "expect": {"calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}}]}
    mine = {"name": "mine", "tools": {"get_weather": TOOLS["get_weather"]}, "cases": [
        {"id": "t1", "category": "no_tool", "prompt": "hi", "expect": {"text": True}}]}
    suite = suites.merge_suites([base, mine])
    assert suite["name"] == "base+mine" and [c["id"] for c in suite["cases"]] == ["w1", "t1"]
    assert [c["id"] for c in suites.select_cases(suite, ["w*"])] == ["w1"]
    assert [c["id"] for c in suites.select_cases(suite, categories=["no_tool"])] == ["t1"]
    assert suites.select_cases(suite, ["w*"], ["no_tool"]) == []
    settings = {"temperature": 0, "max_tokens": 512, "streaming": True}
    digest = suites.suite_digest(suite["cases"], suite["tools"], settings)
    assert digest == suites.suite_digest(suite["cases"], suite["tools"], dict(settings))
    assert digest != suites.suite_digest(suite["cases"], suite["tools"], dict(settings, temperature=0.7))
    assert digest != suites.suite_digest(suite["cases"][:1], suite["tools"], settings)
    with pytest.raises(check.SuiteError, match="defined twice, differently"):
        suites.merge_suites([base, {"tools": {"get_weather": {"parameters": {"type": "object"}}}, "cases": []}])


def test_build_request():
    case = {"id": "m", "category": "multi_turn", "tools": ["get_weather"], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"}], "expect": {"text": True}}
    body = suites.build_request(case, TOOLS, "lab-chat", 0.0, 256, True)
    assert body["model"] == "lab-chat" and body["stream"] is True and body["max_tokens"] == 256
    assert body["tool_choice"] == "auto"
    assert body["tools"] == [{"type": "function", "function": WEATHER}]
    call = body["messages"][1]["tool_calls"][0]
    assert call == {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    assert case["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}  # the suite is untouched
    plain = suites.build_request({"id": "p", "category": "x", "prompt": "hi", "max_tokens": 9, "expect": {"text": True}},
                                 {}, "m", 0.0, 256, False)
    assert "tools" not in plain and "tool_choice" not in plain and plain["max_tokens"] == 9
    assert plain["messages"] == [{"role": "user", "content": "hi"}]


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
    suite = suites.merge_suites([suites.load_bfcl(data, ["simple", "parallel", "irrelevance"], tool_choice="required")])
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
    offered = suites.case_tools(first, suite["tools"])
    right = check.parse_completion(completion([("calculate_triangle_area", {"base": 10, "height": 5})]))
    wrong = check.parse_completion(completion([("calculate_triangle_area", {"base": 5, "height": 10})]))
    assert check.reply_errors(right, first, offered) == []
    assert check.reply_errors(wrong, first, offered)
    parallel = cases["bfcl_parallel_0"]
    both = check.parse_completion(completion([("spotify_play", {"artist": "maroon 5", "duration": 15}),
                                              ("spotify_play", {"artist": "Taylor Swift", "duration": 20})]))
    assert check.reply_errors(both, parallel, suites.case_tools(parallel, suite["tools"])) == []

    limited = suites.load_bfcl(data, ["simple"], limit=1)
    assert [c["id"] for c in limited["cases"]] == ["bfcl_simple_python_0"] and limited["cases"][0]["tool_choice"] == "auto"


@pytest.mark.parametrize("categories, words", [
    (["multiple"], "no BFCL_v*_multiple.json under"),
    (["live_simple"], "unknown BFCL category 'live_simple'"),
])
def test_load_bfcl_errors(tmp_path, categories, words):
    data = write_bfcl(tmp_path)
    with pytest.raises(check.SuiteError) as raised:
        suites.load_bfcl(data, categories)
    assert words in str(raised.value)
    with pytest.raises(check.SuiteError, match="is not a directory"):
        suites.load_bfcl(str(tmp_path / "nowhere"), ["simple"])


def test_bfcl_expected():
    assert suites.bfcl_expected([5]) == 5
    assert suites.bfcl_expected(["2021-01-28", "01/28/2021"]) == {"$one_of": ["2021-01-28", "01/28/2021"]}
    assert suites.bfcl_expected(["", 0]) == {"$optional": 0}
    assert suites.bfcl_expected([""]) == {"$absent": True}
    assert suites.bfcl_expected([[3, 4]]) == [3, 4]
    assert suites.bfcl_expected([{"city": ["Paris"], "zip": ["", "75001"]}]) == {"city": "Paris", "zip": {"$optional": "75001"}}
    assert suites.bfcl_schema({"type": "dict", "properties": {"x": {"type": "any"}, "y": {"type": "tuple", "items": {"type": "float"}},
                                                              "z": {"type": "string", "optional": True, "default": "a"}}}) == {
        "type": "object", "properties": {"x": {}, "y": {"type": "array", "items": {"type": "number"}},
                                         "z": {"type": "string", "default": "a"}}}
