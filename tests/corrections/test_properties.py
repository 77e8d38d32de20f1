"""Property-based tests (hypothesis) of the pieces that see arbitrary user text.

- the ``patch`` history editor changes nothing but the occurrences of the corrected span: between them, and in
  every turn it may not touch, the text is kept character for character;
- the correction detectors (template, cue, and the composite of the default ``detectors`` setting) never raise
  on any unicode text (surrogates excepted: JSON and keproxy's parser refuse them), empty strings, text past
  their size caps, odd message shapes; what they return points at real user turns;
- the OpenAI request model accepts or rejects any JSON value with a ValidationError only, and what it accepts
  can always be serialised for the upstream and the transcript; through the app, any JSON body gets a status
  below 500.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import json
from typing import Any

import httpx
import orjson
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keproxy.corrections.base import Correction
from keproxy.corrections.detect import (
    MAX_CUE_CHARS,
    MAX_TEMPLATE_CHARS,
    CueDetector,
    TemplateDetector,
    build_detector,
)
from keproxy.corrections.occurrences import find_occurrences, replace_occurrences
from keproxy.corrections.templates import TEMPLATES
from keproxy.editors.base import EditContext
from keproxy.editors.history.patch import PatchEditor
from keproxy.proxy.protocol import ChatCompletionRequest
from keproxy.settings import Settings, load_settings
from tests.conftest import client_for
from tests.upstream_stub import release_litellm

QUOTES = str.maketrans("“”„‟«»″‘’‚‛′`", '"""""""' + "''''''")
FAST = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies -------------------------------------------------------------------------------------------------

#: Any text but lone surrogates (which JSON, orjson and so keproxy's request parser refuse).
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=120)
#: Words that make spans and boundaries interesting: letters, digits, quotes, punctuation, spaces of all kinds.
word = st.text(st.sampled_from("abcXYZ01é_'\"“”‘’-., \t\n\u00a0ßİ"), min_size=1, max_size=8)
#: Up to a bit past the template cap, built by repetition so that it stays cheap to generate.
huge_text = st.builds(
    lambda s, n: s * n, st.text(min_size=1, max_size=40), st.integers(1, MAX_TEMPLATE_CHARS // 8)
)


@st.composite
def texts_with_span(draw: st.DrawFn) -> tuple[str, list[str]]:
    """(old span, turn texts) where the texts mix random words, the span itself and case/space variants."""
    old = draw(st.text(st.sampled_from("abcXYZ01é'\"“ -"), min_size=1, max_size=12).filter(str.strip))
    variants = st.sampled_from([old, old.upper(), old.lower(), " ".join(old.split()), old.replace(" ", "  ")])
    piece = st.one_of(word, variants, any_text)
    turns = draw(st.lists(st.lists(piece, max_size=8).map("".join), min_size=1, max_size=5))
    return old, turns


def _text(message: dict[str, Any]) -> str:
    """The string content, or the text of the first (text) part."""
    content = message["content"]
    return content if isinstance(content, str) else content[0]["text"]


def _content(text: str, as_parts: bool) -> Any:
    if not as_parts:
        return text
    return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "data:,x"}}]


# -- (a) patch touches nothing but the corrected spans ----------------------------------------------------------


def _norm(text: str) -> str:
    """Case, runs of whitespace and curly quotes folded (what find_occurrences' fallback ignores)."""
    return " ".join(text.translate(QUOTES).split()).lower()


def _expected(text: str, old: str, new: str) -> str:
    """``text`` with the spans :func:`find_occurrences` reports replaced, and nothing else changed."""
    out, pos = [], 0
    for start, end in find_occurrences(text, old):
        before = text[start:end]
        out += [
            text[pos:start],
            new[0].upper() + new[1:] if before[:1].isupper() and new[:1].islower() else new,
        ]
        pos = end
    return "".join(out) + text[pos:]


@FAST
@given(texts_with_span(), st.text(st.sampled_from("qrsQ 9é"), min_size=1, max_size=10), any_text)
def test_replace_occurrences_keeps_every_character_outside_the_spans(
    case: tuple[str, list[str]], new: str, other: str
) -> None:
    old, turns = case
    for text in turns:
        spans = find_occurrences(text, old)
        # the spans are ordered, disjoint, inside the text, and each is the old span up to case, spaces, quotes
        assert all(0 <= a < b <= len(text) for a, b in spans)
        assert all(b1 <= a2 for (_, b1), (a2, _) in itertools.pairwise(spans))
        assert all(_norm(text[a:b]) == _norm(old) for a, b in spans)
        for as_parts in (False, True):
            message = {"role": "user", "content": _content(text, as_parts), "name": other}
            snapshot = copy.deepcopy(message)
            patched, replaced = replace_occurrences(message, old, new)
            assert message == snapshot  # the input is never mutated
            assert _text(patched) == _expected(text, old, new)
            assert [before for before, _ in replaced] == [text[a:b] for a, b in spans]
            assert {k: v for k, v in patched.items() if k != "content"} == {"role": "user", "name": other}
            if as_parts:
                assert patched["content"][1] == message["content"][1]  # non-text parts untouched


@FAST
@given(texts_with_span(), st.text(st.sampled_from("qrsQ 9é"), min_size=1, max_size=10), st.booleans())
def test_patch_editor_only_rewrites_earlier_user_and_assistant_turns(
    case: tuple[str, list[str]], new: str, as_parts: bool
) -> None:
    old, turns = case
    roles = ["system", "user", "assistant", "tool"]
    history = [{"role": roles[i % 4], "content": _content(t, as_parts)} for i, t in enumerate(turns)]
    correction_turn = len(history)
    messages = [
        *history,
        {"role": "user", "content": f'Wrong. It\'s not "{old}," but "{new}"'},
        {"role": "assistant", "content": f"so {old} it is"},
        {"role": "user", "content": old},
    ]
    snapshot = copy.deepcopy(messages)
    correction = Correction(correction_turn, old, new, "test", 1.0, 6)
    result = asyncio.run(PatchEditor().edit(messages, [correction], EditContext()))
    assert messages == snapshot
    assert result.messages[correction_turn:] == messages[correction_turn:]
    for index, (before, after) in enumerate(zip(messages[:correction_turn], result.messages, strict=False)):
        if before["role"] not in ("user", "assistant") or old == new:
            assert after == before
        else:
            assert _text(after) == _expected(_text(before), old, new)
        edits = [e for e in result.edits if e.turn_index == index]
        assert bool(edits) == (after != before)
        assert all(
            e.correction_turn == correction_turn and e.after in (new, new[:1].upper() + new[1:])
            for e in edits
        )


# -- (b) detectors never raise ------------------------------------------------------------------------------------

#: Detectors under test: each rule detector alone and the composite the default settings build (the learned
#: pipeline with the shipped taggers).
DETECTOR_NAMES = ["template", "cue", "settings-default"]


@functools.cache  # one detector per name for all examples: the learned one loads its taggers once
def _detector(name: str) -> Any:
    if name == "template":
        return TemplateDetector()
    if name == "cue":
        return CueDetector()
    return build_detector(Settings.model_fields["detectors"].get_default(call_default_factory=True))


template_text = st.builds(
    lambda template, a, b: template.replace("[O]", a).replace("[N]", b),
    st.sampled_from(sorted(TEMPLATES.values())),
    any_text,
    any_text,
)
utterance = st.one_of(any_text, template_text, huge_text, st.just(""), st.just(" "), word)
odd_content = st.one_of(
    utterance,
    st.none(),
    st.integers(),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": utterance}),
            st.dictionaries(any_text, st.one_of(any_text, st.integers(), st.none()), max_size=3),
            st.integers(),
        ),
        max_size=3,
    ),
)
message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": odd_content}
    ),
    st.dictionaries(any_text, any_text, max_size=2),
)


@pytest.mark.parametrize("name", DETECTOR_NAMES)
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(messages=st.lists(message, max_size=6))
def test_detectors_never_raise_on_any_text(name: str, messages: list[dict[str, Any]]) -> None:
    found = _detector(name).detect(messages)
    for correction in found:
        assert 1 <= correction.turn_index < len(messages)
        assert messages[correction.turn_index].get("role") == "user"
        assert isinstance(correction.new, str) and 0.0 <= correction.confidence <= 1.0
        assert correction.old is None or isinstance(correction.old, str)


@pytest.mark.parametrize("name", ["template", "cue"])
def test_detectors_skip_text_past_their_cap(name: str) -> None:
    """Past the size caps nothing is parsed (and nothing raises): a template-shaped turn of 30k characters."""
    cap = MAX_TEMPLATE_CHARS if name == "template" else MAX_CUE_CHARS
    long_old = "x" * cap
    turn = f'Wrong. It\'s not "{long_old}," but "y"'
    messages = [{"role": "user", "content": long_old}, {"role": "user", "content": turn}]
    assert _detector(name).detect(messages) == []


# -- (c) the request parser -------------------------------------------------------------------------------------

json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False, allow_infinity=False),
    any_text,
)  # fmt: skip
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(any_text, inner, max_size=3)),
    max_leaves=12,
)
chat_shaped = st.fixed_dictionaries(
    {
        "model": st.one_of(any_text, json_value),
        "messages": st.one_of(
            json_value,
            st.lists(
                st.fixed_dictionaries(
                    {"role": st.one_of(st.sampled_from(["user", "assistant", "developer"]), json_value)},
                    optional={"content": st.one_of(odd_content, json_value), "name": json_value},
                ),
                max_size=3,
            ),
        ),
    },
    optional={"stream": json_value, "keproxy": json_value, "temperature": json_value, "user": json_value},
)


@FAST
@given(st.one_of(json_value, chat_shaped))
def test_request_model_accepts_or_rejects_cleanly(body: Any) -> None:
    try:
        request = ChatCompletionRequest.model_validate(body)
    except pydantic.ValidationError:
        return
    orjson.dumps(request.upstream_body())  # what goes upstream and into the transcript serialises


@pytest.fixture(scope="module")
def app_client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An in-process app on litellm's mock, with its own event loop (hypothesis drives it synchronously)."""
    loop = asyncio.new_event_loop()
    clients = client_for(load_settings(mock_response="ok", data_dir=tmp_path_factory.mktemp("props")))
    client = loop.run_until_complete(clients.__anext__())
    yield loop, client
    loop.run_until_complete(clients.aclose())
    loop.run_until_complete(release_litellm())
    loop.close()


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(json_value, chat_shaped))
def test_any_json_body_gets_an_answer_below_500(app_client: Any, body: Any) -> None:
    loop, client = app_client

    async def post() -> httpx.Response:
        return await client.post(
            # the standard library writes integers beyond 64 bits too (orjson.dumps raises on them)
            "/v1/chat/completions",
            content=json.dumps(body),
            headers={"content-type": "application/json"},
        )

    resp = loop.run_until_complete(post())
    assert resp.status_code < 500, resp.text
    if resp.status_code >= 400:
        assert set(resp.json()["error"]) == {"message", "type", "param", "code"}
