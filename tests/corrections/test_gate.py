"""The correction gate: the shipped build is reproduced by ``keproxy train gate``, ordinary requests stop before
the turn tagger, corrections go on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from keproxy.corrections.gate import GATE_DIR, CorrectionGate, GateMissingError
from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions
from keproxy.train.gate import train_gate


def test_a_rebuild_gives_the_shipped_gate(tmp_path: Path) -> None:
    manifest = train_gate(tmp_path, log=lambda _: None)
    assert manifest["cached"] is False
    shipped, rebuilt = np.load(GATE_DIR / "gate.npz"), np.load(tmp_path / "gate.npz")
    for key in ("index", "weight"):  # float32 weights: byte-identical
        assert np.array_equal(shipped[key], rebuilt[key]), key
    # the float64 intercept moves in its last bits with the CPU's BLAS kernels (9e-15 seen on an AMD EPYC whose
    # rebuild is otherwise identical), below anything the float32 scores or the threshold can see
    assert abs(float(shipped["bias"]) - float(rebuilt["bias"])) < 1e-12
    assert manifest["threshold"] == CorrectionGate().threshold
    assert train_gate(tmp_path, log=lambda _: None)["cached"] is True


def test_corrections_pass_and_plain_requests_stop() -> None:
    gate = CorrectionGate()
    corrections = ["Actually, it's at 4pm.", "Wrong. It's not Paris, but Lyon.", "Make that Tuesday."]
    requests = ["Can you write a short poem about autumn?", "What time does the museum open on Sundays?"]
    assert gate.passes(corrections) == [True] * 3
    assert gate.passes(requests) == [False] * 2
    scores = gate.scores([*corrections, *requests])
    assert scores.shape == (5,) and ((scores >= 0) & (scores <= 1)).all()


def test_one_by_one_scores_equal_scikit_learns_batch_features() -> None:
    from keproxy.corrections.gate import gate_features

    texts = [
        "Actually, it's at 4pm.", "Can you write a short poem about autumn?", "", "   ", "?!", "Ünïcödé 東京 ok",
        "Request 17: what is the capital of Veloria-17? And the currency?", "no no NO, it's 12:30 not 12:00!!",
    ]  # fmt: skip
    gate = CorrectionGate(cache_size=0)
    weight, bias = gate._load()
    batch = 1.0 / (1.0 + np.exp(-(gate_features(texts) @ weight + bias)))
    alone = np.concatenate([gate.scores([t]) for t in texts])  # fewer than 8 texts: scored one by one
    assert np.allclose(alone, batch, rtol=0, atol=1e-12)


def test_scores_of_turns_already_seen_come_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    import keproxy.corrections.gate as gate_module

    texts = ["Actually, it's at 4pm.", "Plan a day in Lisbon.", "Make that Tuesday."]
    alone = [float(CorrectionGate(cache_size=0).scores([t])[0]) for t in texts]
    gate = CorrectionGate(cache_size=2)
    featurised: list[str] = []
    words, chars = gate_module._analyzers()
    monkeypatch.setattr(
        gate_module, "_analyzers", lambda: (lambda text: featurised.append(text) or words(text), chars)
    )
    first = gate.scores([texts[0], texts[1], texts[0]])
    again = gate.scores([texts[1], texts[2], texts[0]])
    last = gate.scores([texts[1]])  # the least recently used of the three, dropped from the 2-entry cache
    assert featurised == [texts[0], texts[1], texts[2], texts[1]]
    assert list(first) == [alone[0], alone[1], alone[0]] and list(again) == [alone[1], alone[2], alone[0]]
    assert list(last) == [alone[1]]


def test_a_turn_the_gate_stops_never_reaches_the_turn_tagger() -> None:
    chat = [
        {"role": "user", "content": "Plan a day in Lisbon for me."},
        {"role": "assistant", "content": "Morning in Alfama, lunch in Baixa, sunset at Miradouro da Graça."},
        {"role": "user", "content": "Can you write a short poem about autumn?"},
    ]
    gated = CorrectionUnderstanding()
    assert gated.detect(chat) == []
    assert gated.turn_tagger.cache_misses == 0  # no forward pass
    ungated = CorrectionUnderstanding(options=UnderstandingOptions(gate=False))
    assert ungated.detect(chat) == []
    assert ungated.turn_tagger.cache_misses == 1


def test_a_missing_gate_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(GateMissingError, match="keproxy train gate"):
        CorrectionGate(tmp_path)


def test_ordinary_turns_are_checked_deduplicated_and_split(tmp_path: Path) -> None:
    from keproxy.train.gate import OrdinaryTurnError, ordinary_split, ordinary_turns

    rows = [
        {"text": "What is the capital of Mongolia?", "domain": "trivia", "register": "terse"},
        {
            "text": "what is the capital of mongolia",
            "domain": "trivia",
            "register": "casual",
        },  # near-duplicate
        {"text": "Book 2 seats for 19:30, please.", "domain": "travel", "register": "polite"},
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    texts = ordinary_turns(root=tmp_path)
    assert texts == [rows[0]["text"], rows[2]["text"]]
    assert sorted(ordinary_turns("train", tmp_path) + ordinary_turns("dev", tmp_path)) == sorted(texts)
    assert all(ordinary_split(t) == ordinary_split(t.upper()) for t in texts)

    bad = {"text": "Sorry, I meant Friday.", "domain": "scheduling", "register": "terse"}
    (tmp_path / "b.jsonl").write_text(json.dumps(rows[2]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(OrdinaryTurnError, match=r"b\.jsonl:2: holds the correction cue 'Sorry'"):
        ordinary_turns(root=tmp_path)
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "Make it Tuesday."}) + "\n")
    with pytest.raises(OrdinaryTurnError, match="text, domain and register"):
        ordinary_turns(root=tmp_path)


def test_a_request_the_gate_stops_is_detected_on_the_event_loop() -> None:
    import asyncio
    import threading
    from types import SimpleNamespace

    from keproxy.corrections.detect.detectors import CompositeDetector, TemplateDetector
    from keproxy.pipeline.stages import DetectStage

    history = [
        {"role": "user", "content": "The meeting is on Tuesday at 3pm in Room 204."},
        {"role": "assistant", "content": "Noted: Tuesday, 3pm, Room 204."},
    ]
    ordinary = [*history, {"role": "user", "content": "What is the capital of Mongolia?"}]
    correcting = [*history, {"role": "user", "content": "Actually, it's at 4pm."}]
    learned = CorrectionUnderstanding()
    assert learned.screen(ordinary) is False and learned.screen(correcting) is True
    detector = CompositeDetector([learned, TemplateDetector()])
    assert detector.blocking and detector.screen(ordinary) is False and detector.screen(correcting) is True

    threads: list[str] = []
    detect = learned.detect
    learned.detect = lambda messages: threads.append(threading.current_thread().name) or detect(messages)  # type: ignore[method-assign]

    async def run(messages: list[dict[str, str]]) -> list[object]:
        request = SimpleNamespace(
            messages=messages, corrections=None, transcript=SimpleNamespace(corrections=None)
        )
        await DetectStage(detector).run(request)  # type: ignore[arg-type]
        return list(request.corrections)

    assert asyncio.run(run(ordinary)) == []
    [correction] = asyncio.run(run(correcting))
    assert correction.new == "4pm"
    assert threads[0] == "MainThread" and threads[1] != "MainThread"  # the correction went to a worker thread
