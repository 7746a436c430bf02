# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The nginx_proxy role's preflight refusals (``_proxy_check.check``): one row per refusal, and the settings that
pass. Whole ansible-playbook runs of the role's preflight are tests/unit/roles/test_nginx_proxy_preflight.py's."""

from __future__ import annotations

import pytest

from ansible_collections.factory_floor.llm.plugins.module_utils import _proxy_check as pc

KEY = "lab-key-Z9.~+/-_=="
GOOD = dict(backends=["spark-a", "spark-b"], affinity_headers=["x-session-id"],
            affinity_body_fields=["prompt_cache_key", "user"], expect_in_rotation=[], drain=[], port=8080,
            check_interval=1, check_fails=3, check_passes=2, balance="affinity", affinity_balance_factor=1.5,
            affinity_body_buffer_size="4m", api_key=KEY, api_key_next="", tls_certificate="",
            tls_certificate_key="", tls_server_name="gateway")
PLACE = dict(host="gateway", engine_group="gb10", engines=["spark-a", "spark-b"],
             endpoints=["spark-a:8000", "spark-b:8000"])


def refusal(place=None, **changes):
    errors = pc.check(dict(GOOD, **changes), **dict(PLACE, **(place or {})))
    assert len(errors) <= 1
    return errors[0] if errors else None


@pytest.mark.parametrize("changes", [
    {}, dict(affinity_headers=[]), dict(balance="least_conn"), dict(api_key=""), dict(affinity_body_buffer_size=512),
    dict(tls_certificate="/etc/ssl/proxy.crt", tls_certificate_key="/etc/ssl/proxy.key"), dict(port="8080"),
])
def test_settings_that_can_work_pass(changes):
    assert refusal(**changes) is None


def test_lists_given_as_strings_or_mappings_are_named_in_order():
    error = refusal(backends=3, affinity_body_fields="user", drain={"spark-a": 1})
    assert error["check"] == "not_a_list"
    assert error["variables"] == ["nginx_proxy_backends", "nginx_proxy_affinity_body_fields", "nginx_proxy_drain"]
    assert error["message"] == (
        "nginx_proxy_backends, nginx_proxy_affinity_body_fields, nginx_proxy_drain must be a YAML list (for example "
        "nginx_proxy_affinity_body_fields: [prompt_cache_key, user]), not a string or a mapping: write the value as "
        "[a, b] or one \"- item\" per line.")


@pytest.mark.parametrize("place, changes", [
    (dict(engines=None, engine_group="nope"), {}),
    (dict(engines=[]), {}),
    ({}, dict(backends=[])),
    ({}, dict(port=0)),
    ({}, dict(port=65536)),
    ({}, dict(port="abc")),
    ({}, dict(check_interval=0)),
    ({}, dict(check_fails=0)),
    ({}, dict(check_passes="x")),
])
def test_a_proxy_without_engines_or_with_a_bad_port_or_probe_count_is_refused(place, changes):
    error = refusal(place, **changes)
    assert error["check"] == "layout"
    assert error["message"].startswith("The proxy on gateway needs at least one engine host in group '%s' "
                                       "(site_engine_group; now: " % dict(PLACE, **place)["engine_group"])


def test_the_layout_refusal_reads_the_same_as_the_roles_assert_did():
    assert refusal(dict(engines=None, engine_group="nope"), port="abc")["message"] == (
        "The proxy on gateway needs at least one engine host in group 'nope' (site_engine_group; now: none), a port "
        "in 1-65535 (site_proxy_port=abc), nginx_proxy_check_interval > 0 seconds and nginx_proxy_check_fails, "
        "nginx_proxy_check_passes >= 1 (now 3, 2).")


def test_two_backends_at_one_address_and_port_are_refused():
    error = refusal(dict(endpoints=["spark-a:8000", "spark-a:8000"]))
    assert error["check"] == "same_endpoint"
    assert error["message"] == ("Two backends in 'gb10' use the same address:port (spark-a:8000, spark-a:8000): "
                                "give each replica its own vllm_port or host.")


@pytest.mark.parametrize("changes", [
    dict(balance="round_robin"), dict(affinity_headers=["x-session-id", "session_id"]), dict(affinity_headers=[1]),
    dict(affinity_balance_factor=0.5), dict(affinity_balance_factor="x"), dict(affinity_body_buffer_size="4g"),
    dict(affinity_body_fields=[1, "user"]),
])
def test_affinity_settings_nginx_cannot_use_are_refused(changes):
    error = refusal(**changes)
    assert error["check"] == "affinity"
    assert error["message"].startswith("nginx_proxy_balance must be affinity or least_conn (now ")


def test_the_affinity_refusal_shows_the_header_list():
    message = refusal(affinity_headers=["x-session-id", "session_id"])["message"]
    assert ("nginx_proxy_affinity_headers a list of header names, each of letters, digits and '-' (nginx drops "
            "headers with '_'; now ['x-session-id', 'session_id'])") in message


@pytest.mark.parametrize("name, value", [
    ("api_key", "two words"), ("api_key", KEY + "\n"), ("api_key", " " + KEY), ("api_key", "a=b"),
    ("api_key_next", "two words"),
])
def test_a_key_outside_a_bearer_tokens_characters_is_refused_without_showing_it(name, value):
    error = refusal(**{name: value})
    assert error["check"] == "key_characters" and error["variables"] == ["nginx_proxy_" + name]
    assert value.strip() not in error["message"]
    assert error["message"].startswith("nginx_proxy_%s (default: site_%s, vllm_%s of spark-a) has a character "
                                       "outside a bearer token's" % (name, name, name))
    assert error["message"].endswith("Its value is not shown.")


@pytest.mark.parametrize("changes", [
    dict(tls_certificate="/etc/ssl/proxy.crt"), dict(tls_certificate_key="/etc/ssl/proxy.key"),
    dict(tls_certificate="/etc/ssl/p roxy.crt", tls_certificate_key="/k"),
    dict(tls_certificate="/c", tls_certificate_key="/k;"),
    dict(tls_certificate="/c", tls_certificate_key="/k", tls_server_name=""),
])
def test_half_or_unusable_tls_settings_are_refused(changes):
    error = refusal(**changes)
    assert error["check"] == "tls"
    assert error["message"].startswith("TLS at the proxy needs both nginx_proxy_tls_certificate and "
                                       "nginx_proxy_tls_certificate_key (paths on gateway, without spaces")
