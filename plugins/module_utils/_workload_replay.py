# -*- coding: utf-8 -*-
# Copyright: Factory Floor maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The load plan of a replay of a workload profile (issue 38, second brick): pure logic, no network.

From a profile (``_workload_profile.profile()``, or its JSON) and a seed, ``plan()`` returns
an open-loop schedule: request arrival times (a Poisson process at the profile's arrival
rate, or at one hour's rate), each request's prompt and output length drawn from the
profile's length histograms, and conversations that re-use a prefix so the engines' prefix
cache sees about the profile's hit fraction. Same profile and seed, same plan.

How lengths are drawn: a bucket of the profile's cumulative histogram with its share of
the requests, then a whole number inside it (``(lower, upper]``; the first bucket starts at
0, at least 1 token), at ``lower + width * u ** k`` for a uniform ``u``. ``k`` is the one
exponent, for all buckets, that makes the plan's expected mean the profile's exact mean
(``_sum / _count``): the profile knows how many requests fell in each bucket and their
total, not where inside; ``k = 1`` (uniform) when it has no mean, ``1/(k+1)`` kept within
0.05-0.95. Requests the profile counted above the last finite bucket get that bound
(vLLM's last bucket is at most ``max_model_len``).

How prefixes are re-used: a request is a later turn of an open conversation with
probability ``follow_up`` (at most 0.95); its first ``prefix_tokens`` tokens are the conversation's own
text (the replay generates each conversation's text from its number, so every turn starts
the same), a share ``reuse`` of its prompt, never more than the conversation has sent
before (``cached_tokens``, what the engine can find, whole 16-token blocks). ``follow_up`` is
found by bisection (deterministic passes over the same draws) so that the plan's cached
tokens over its prompt tokens meet the profile's ``prefix_cache_hit_fraction``; a target
above what ``reuse`` and 0.95 follow-ups can reach is not met, and ``summary`` says so.
"""

from __future__ import annotations

import bisect
import math
import random

SCHEMA = "factory_floor.llm.workload_replay_plan/1"
BLOCK_TOKENS = 16  # vLLM's default KV block size: the prefix cache matches whole blocks
DEFAULT_REUSE = 0.9
DEFAULT_OPEN_CONVERSATIONS = 16
MAX_FOLLOW_UP = 0.95  # some first turns always: one endless conversation is nobody's traffic
CALIBRATION_PASSES = 14


class PlanError(ValueError):
    """The profile cannot be replayed (no rate, no lengths) or an argument is wrong."""


def _section(profile, engine):
    if profile.get("schema", "").split("/")[0] != "factory_floor.llm.workload_profile":
        raise PlanError("not a workload profile (schema %r)" % profile.get("schema"))
    if engine is None:
        section = profile.get("total")
    else:
        found = [e for e in profile.get("engines") or () if e.get("name") == engine]
        if not found:
            raise PlanError("the profile has no engine %r" % engine)
        section = found[0].get("profile")
    if not section:
        raise PlanError("the profile has no measured section for %s" % (engine or "the total"))
    return section


def _rate(section, hour, rate_scale):
    if hour is None:
        rate = section.get("arrival_rate_requests_per_s")
    else:
        rows = section.get("by_hour") or []
        if hour == "busiest":
            hour = section.get("busiest_hour_utc")
        found = [r for r in rows if r["hour_utc"] == hour]
        if not found:
            raise PlanError("the profile has no hour %r (it has %s)" % (hour, ", ".join(r["hour_utc"] for r in rows) or "none"))
        rate = found[0]["arrival_rate_requests_per_s"]
    if not rate or rate <= 0:
        raise PlanError("the profile's arrival rate is %r: nothing to replay" % rate)
    return rate * rate_scale


class LengthSampler:
    """Draws whole token counts from cumulative buckets ``[[le, count], ...]`` (``le`` ``"+Inf"`` last)."""

    def __init__(self, buckets, name, mean=None):
        bounds, counts = [], []
        for le, count in buckets or ():
            bounds.append(math.inf if le in ("+Inf", math.inf) else float(le))
            counts.append(float(count))
        finite = [b for b in bounds if b != math.inf]
        if not counts or not counts[-1] or not finite:
            raise PlanError("the profile has no %s distribution (no request finished in its window, or the "
                            "engines export no length histograms)" % name)
        self.ranges, self.cumulative = [], []
        lower, below, highest = 0.0, 0.0, finite[-1]
        for upper, count in zip(bounds, counts):
            count = max(count, below)  # monotonic, as Prometheus forces it
            if count > below:
                low, high = (lower, upper) if upper != math.inf else (highest - 1, highest)
                self.ranges.append((int(low) + 1, max(int(high), int(low) + 1)))
                self.cumulative.append(count)
            lower, below = upper, count
        self.exponent = 1.0
        if mean:
            total, previous, base, spread = self.cumulative[-1], 0.0, 0.0, 0.0
            for (low, high), count in zip(self.ranges, self.cumulative):
                share = (count - previous) / total
                base += share * (low - 1)
                spread += share * (high - low + 1)
                previous = count
            if spread > 0:
                position = min(max((mean - base) / spread, 0.05), 0.95)  # E[u ** k] = 1 / (k + 1)
                self.exponent = 1.0 / position - 1.0

    def draw(self, rng):
        pick = rng.random() * self.cumulative[-1]
        low, high = self.ranges[bisect.bisect_right(self.cumulative, pick)]
        return min(max(int(low - 1 + (high - low + 1) * rng.random() ** self.exponent) + 1, low), high)


def _schedule(rng, rate, seconds):
    times, t = [], 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            return times
        times.append(round(t, 6))


def _build(seed, times, prompts, outputs, follow_up, reuse, open_conversations):
    rng = random.Random("%s/conversations" % seed)
    requests, sent, open_ids = [], [], []
    for index, at in enumerate(times):
        prompt = prompts[index]
        if open_ids and rng.random() < follow_up:
            conversation = rng.choice(open_ids)
            prefix = min(int(prompt * reuse), prompt - 1)
            cached = min(prefix, sent[conversation]) // BLOCK_TOKENS * BLOCK_TOKENS
            sent[conversation] = max(sent[conversation], prefix)
        else:
            conversation = len(sent)
            sent.append(prompt)  # a first turn is all conversation text
            open_ids.append(conversation)
            if len(open_ids) > open_conversations:
                open_ids.pop(0)
            prefix = cached = 0
        requests.append({"at_seconds": at, "conversation": conversation, "prompt_tokens": prompt,
                         "prefix_tokens": prefix, "cached_tokens": cached, "output_tokens": outputs[index]})
    return requests


def _hit_fraction(requests):
    prompt = sum(r["prompt_tokens"] for r in requests)
    return sum(r["cached_tokens"] for r in requests) / prompt if prompt else 0.0


def plan(profile, seconds, seed, engine=None, hour=None, rate_scale=1.0, reuse=DEFAULT_REUSE,
         open_conversations=DEFAULT_OPEN_CONVERSATIONS, max_model_len=None):
    """An open-loop load plan of ``seconds`` replaying ``profile`` (the total, or one ``engine``'s part).

    ``hour`` (``"YYYY-MM-DDTHH"`` or ``"busiest"``) replays that hour's arrival rate instead of the
    window's; ``rate_scale`` multiplies it. ``max_model_len`` caps prompt + output (tokens).
    Returns ``{schema, seed, duration_seconds, arrival_rate_requests_per_s, prefix_cache_hit_fraction_target,
    follow_up_fraction, requests: [{at_seconds, conversation, prompt_tokens, prefix_tokens, cached_tokens,
    output_tokens}], summary}``; ``summary`` is the plan's own rate, mean lengths and hit fraction.
    """
    if not seconds or seconds <= 0:
        raise PlanError("seconds must be positive, got %r" % (seconds,))
    if not 0 < reuse <= 1:
        raise PlanError("reuse must be a fraction in (0, 1], got %r" % (reuse,))
    if rate_scale <= 0:
        raise PlanError("rate_scale must be positive, got %r" % (rate_scale,))
    section = _section(profile, engine)
    rate = _rate(section, hour, rate_scale)
    prompt, output = section.get("prompt_length_tokens") or {}, section.get("output_length_tokens") or {}
    prompt_sampler = LengthSampler(prompt.get("buckets"), "prompt length", prompt.get("mean"))
    output_sampler = LengthSampler(output.get("buckets"), "output length", output.get("mean"))

    times = _schedule(random.Random("%s/arrivals" % seed), rate, seconds)
    rng = random.Random("%s/lengths" % seed)
    prompts, outputs = [], []
    for _at in times:
        prompt, output = prompt_sampler.draw(rng), output_sampler.draw(rng)
        if max_model_len and prompt + output > max_model_len:
            prompt = max(min(prompt, max_model_len - 1), 1)
            output = max(max_model_len - prompt, 1)
        prompts.append(prompt)
        outputs.append(output)

    target = section.get("prefix_cache_hit_fraction") or 0.0
    # The hit fraction grows with follow_up; bisect for the target (same seed: each pass is deterministic).
    low, high = 0.0, MAX_FOLLOW_UP
    follow_up = 0.0
    requests = _build(seed, times, prompts, outputs, follow_up, reuse, open_conversations)
    for _pass in range(CALIBRATION_PASSES if target else 0):
        follow_up = (low + high) / 2
        requests = _build(seed, times, prompts, outputs, follow_up, reuse, open_conversations)
        got = _hit_fraction(requests)
        if abs(got - target) < 0.002:
            break
        low, high = (follow_up, high) if got < target else (low, follow_up)

    count = len(requests)
    return {
        "schema": SCHEMA,
        "seed": seed,
        "duration_seconds": seconds,
        "arrival_rate_requests_per_s": round(rate, 6),
        "prefix_cache_hit_fraction_target": target,
        "follow_up_fraction": round(follow_up, 6),
        "requests": requests,
        "summary": {
            "requests": count,
            "arrival_rate_requests_per_s": round(count / seconds, 6),
            "prompt_tokens_mean": round(sum(prompts) / count, 3) if count else None,
            "output_tokens_mean": round(sum(outputs) / count, 3) if count else None,
            "prefix_cache_hit_fraction": round(_hit_fraction(requests), 6),
            "conversations": len({r["conversation"] for r in requests}),
        },
    }
