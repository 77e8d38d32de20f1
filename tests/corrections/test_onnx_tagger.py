"""The shipped correction taggers on ONNX Runtime (``keproxy.corrections.onnx_tagger``) against torch.

Real adapters, a real export (``torch.onnx.export``) into a temporary cache shared by the module's tests, real
ONNX Runtime sessions; the inputs are what the learned pipeline sends (a user turn with its context; a
correcting turn with one earlier sentence).
"""

from __future__ import annotations

import hashlib
import logging
import sys
from pathlib import Path

import pytest

from keproxy.corrections.detect.registry import DetectorResources, get_detector
from keproxy.corrections.model import DEFAULT_RUNTIME, MODELS_DIR, Tagged, Tagger, length_batches
from keproxy.corrections.onnx_tagger import OnnxTaggerModel, export_tagger, load_onnx_tagger, tagger_digest
from keproxy.corrections.understand import CorrectionUnderstanding

pytest.importorskip("onnxruntime")

CONTEXT = "user: The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop.\nassistant: Noted."
TURNS = [
    ("Actually, it's at 4pm.", CONTEXT),
    ("Correction: it's in Room 310, not 204.", CONTEXT),
    ("Is it at 3pm or 4pm?", CONTEXT),
    ("No worries, thanks! Can you also remind me to print the slides?", CONTEXT),
    (
        "Small detail: Pelle said the pier collapsed in 1978, not 1987.",
        "assistant: " + "The storm came. " * 30,
    ),
]
SENTENCES = [
    ("Actually, it's at 4pm.", "The meeting is on Tuesday at 3pm in Room 204."),
    ("Actually, it's at 4pm.", "Please bring your laptop."),
    ("Small detail: Pelle said the pier collapsed in 1978, not 1987.",
     "Pelle said the last time he had seen the sea this grey was in 1987, the year the pier collapsed."),
    ("Small detail: Pelle said the pier collapsed in 1978, not 1987.", "At noon the wind turned north-west."),
    ("Sorry, the café is on Skarvö, not Hallsvik.", "The ferry from Hallsvik had already been cancelled twice."),
]  # fmt: skip
INPUTS = {"turn-tagger": TURNS, "stale-tagger": SENTENCES}
# Both runtimes compute in fp32; they differ only in the order of float sums (ONNX Runtime's fused kernels), so
# a probability moves by ~1e-6 (max |dP| over the 4,391 dev examples of both taggers, bench/tagger_runtime.py).
# 1e-4 leaves that a 100-fold margin and is still far below any decision: a label flips only for an input whose
# probability lies within 1e-4 of the 0.5 threshold.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tagger-onnx-cache")


@pytest.fixture(scope="module")
def torch_tags() -> dict[str, list[Tagged]]:
    return {
        name: Tagger(MODELS_DIR / name, runtime="torch", threads=1, cache_size=0).tag(inputs)
        for name, inputs in INPUTS.items()
    }


def _assert_same_tags(got: list[Tagged], expected: list[Tagged]) -> None:
    for a, b in zip(got, expected, strict=True):
        assert (a.score >= 0.5) == (b.score >= 0.5)
        assert a.score == pytest.approx(b.score, abs=TOLERANCE)
        assert a.spans == b.spans
        assert a.confidence == pytest.approx(b.confidence, abs=TOLERANCE)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_onnx_tags_equal_torch_tags(name: str, cache: Path, torch_tags: dict[str, list[Tagged]]) -> None:
    tagger = Tagger(MODELS_DIR / name, runtime="onnx", threads=1, cache_size=0, onnx_cache_dir=cache)
    got = tagger.tag(INPUTS[name])
    assert tagger.active_runtime == "onnx"
    assert isinstance(tagger._load()[1], OnnxTaggerModel)
    _assert_same_tags(got, torch_tags[name])
    # the cases mean something: a correction with its values, a look-alike without, a stale sentence tagged
    if name == "turn-tagger":
        assert got[0].score >= 0.5 and got[3].score < 0.5
        assert any(stem == "NEW" for *_, stem in got[1].spans)
    else:
        assert got[0].score >= 0.5 and got[1].score < 0.5
        (a, b, stem), *_ = got[2].spans
        assert SENTENCES[2][1][a:b] == "1987" and stem == "STALE"


def test_batching_does_not_change_the_tags(cache: Path, torch_tags: dict[str, list[Tagged]]) -> None:
    one_by_one = Tagger(
        MODELS_DIR / "stale-tagger", runtime="onnx", batch_size=1, cache_size=0, onnx_cache_dir=cache
    )
    _assert_same_tags([one_by_one.tag([x])[0] for x in SENTENCES], torch_tags["stale-tagger"])


def test_the_export_is_reused_and_deterministic(cache: Path, tmp_path: Path) -> None:
    folder = MODELS_DIR / "stale-tagger"
    first = load_onnx_tagger(folder, "onnx", cache_dir=cache, threads=1)
    files = {p.name: p.stat().st_mtime_ns for p in first.path.parent.iterdir()}
    assert first.path == cache / tagger_digest(folder) / "tagger-fp32.onnx"
    # no temporary file left behind; the list of its lookup tables (keproxy.models.onnx_cache) beside it
    assert set(files) == {"tagger-fp32.onnx", "tagger-fp32.onnx.tables.json"}
    second = load_onnx_tagger(folder, "onnx", cache_dir=cache, threads=1)
    assert second.path == first.path
    assert {p.name: p.stat().st_mtime_ns for p in first.path.parent.iterdir()} == files
    again = tmp_path / "again.onnx"
    export_tagger(folder, again, num_labels=5)
    assert hashlib.sha256(again.read_bytes()).digest() == hashlib.sha256(first.path.read_bytes()).digest()


def test_the_two_taggers_get_their_own_graphs() -> None:
    assert tagger_digest(MODELS_DIR / "turn-tagger") != tagger_digest(MODELS_DIR / "stale-tagger")


def test_without_onnxruntime_the_tagger_runs_on_torch(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    cache: Path,
    torch_tags: dict[str, list[Tagged]],
) -> None:
    monkeypatch.setitem(
        sys.modules, "onnxruntime", None
    )  # what `import onnxruntime` meets when not installed
    with pytest.raises(ImportError):
        load_onnx_tagger(MODELS_DIR / "stale-tagger", "onnx", cache_dir=cache)
    tagger = Tagger(MODELS_DIR / "stale-tagger", runtime="onnx", cache_size=0, onnx_cache_dir=cache)
    with caplog.at_level(logging.WARNING, logger="keproxy.corrections.model"):
        got = tagger.tag(SENTENCES)
    assert tagger.active_runtime == "torch"
    assert "tagger runtime onnx unavailable" in caplog.text and "using torch" in caplog.text
    _assert_same_tags(got, torch_tags["stale-tagger"])


def test_an_unwritable_cache_falls_back_to_torch(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    tagger = Tagger(
        MODELS_DIR / "stale-tagger", runtime="onnx", cache_size=0, onnx_cache_dir=blocker / "onnx"
    )
    assert tagger.tag(SENTENCES[:1])[0].score >= 0.5
    assert tagger.active_runtime == "torch"


def test_runtime_from_argument_environment_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = MODELS_DIR / "turn-tagger"
    monkeypatch.delenv("KEPROXY_TAGGER_RUNTIME", raising=False)
    assert Tagger(folder).runtime == DEFAULT_RUNTIME
    monkeypatch.setenv("KEPROXY_TAGGER_RUNTIME", "torch")
    assert Tagger(folder).runtime == "torch"
    assert Tagger(folder, runtime="onnx-int8").runtime == "onnx-int8"
    with pytest.raises(ValueError, match="runtime"):
        Tagger(folder, runtime="tensorrt")
    with pytest.raises(ValueError, match="runtime"):
        load_onnx_tagger(folder, "torch")


def test_a_chat_re_sending_its_history_tags_only_its_new_turn(cache: Path) -> None:
    turn, stale = (Tagger(MODELS_DIR / n, onnx_cache_dir=cache) for n in ("turn-tagger", "stale-tagger"))
    understanding = CorrectionUnderstanding(turn, stale)
    chat = [
        {
            "role": "user",
            "content": "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop.",
        },
        {"role": "assistant", "content": "Noted, see you there."},
        {"role": "user", "content": "Where is it again?"},
        {"role": "assistant", "content": "In Room 204."},
        {"role": "user", "content": "Actually, it's at 4pm."},
    ]
    assert [c.turn_index for c in understanding.detect(chat)] == [4]
    assert (turn.cache_hits, turn.cache_misses) == (0, 2)
    located = stale.cache_misses
    assert located > 0 and stale.cache_hits == 0
    chat += [{"role": "assistant", "content": "Got it: 4pm."}, {"role": "user", "content": "Thanks, bye!"}]
    assert [c.turn_index for c in understanding.detect(chat)] == [4]
    assert (turn.cache_hits, turn.cache_misses) == (2, 3)  # only the new user turn went to the model
    assert (stale.cache_hits, stale.cache_misses) == (located, located)  # turn 4's sentences: all cached


def test_the_learned_detector_takes_runtime_and_threads_from_its_resources() -> None:
    detector = get_detector("learned", DetectorResources(tagger_runtime="torch", threads=2))
    assert isinstance(detector, CorrectionUnderstanding)
    for tagger in (detector.turn_tagger, detector.stale_tagger):
        assert (tagger.runtime, tagger.threads) == ("torch", 2)


@pytest.mark.parametrize(
    "lengths",
    [[], [7], [40, 39, 61, 38, 23, 31, 28, 34, 24, 26, 25, 32, 25, 49, 32, 41, 41, 44, 43, 40, 38, 37, 47, 42],
     [100] * 70, [5, 128, 6, 127, 7, 126]],
)  # fmt: skip
def test_length_batches_cover_every_input_once_and_pad_no_more_than_one_batch(lengths: list[int]) -> None:
    batches = length_batches(lengths, 32)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(0 < len(b) <= 32 for b in batches)
    padded = sum(max(lengths[i] for i in b) * len(b) for b in batches)
    sorted_chunks = sorted(range(len(lengths)), key=lambda i: lengths[i])
    naive = sum(
        max(lengths[i] for i in sorted_chunks[k : k + 32]) * len(sorted_chunks[k : k + 32])
        for k in range(0, len(lengths), 32)
    )
    assert padded <= naive
    if lengths == [5, 128, 6, 127, 7, 126]:  # two lengths far apart: two batches
        assert sorted(sorted(b) for b in batches) == [[0, 2, 4], [1, 3, 5]]


def test_the_onnx_taggers_tokenizer_encodes_as_transformers_does() -> None:
    from transformers import AutoTokenizer

    from keproxy.corrections.model import encode
    from keproxy.corrections.onnx_tagger import PairTokenizer
    from keproxy.models.artifacts import packaged_model_path

    reference = AutoTokenizer.from_pretrained(packaged_model_path(), local_files_only=True)
    ours = PairTokenizer(packaged_model_path())
    assert ours.pad_token_id == reference.pad_token_id
    story = "Ruby the fox lived deep in a birch forest. " * 40  # longer than any max_length: truncated
    pairs = [("Actually, it's at 4pm.", "The meeting is on Tuesday at 3pm in Room 204."), ("Make that Tuesday.", ""),
             ("naïve café: “3 ½ cups”, 日本語 😀", "ÀÉÎ ß ﬁ"), (story, story[:300]), ("", "")]  # fmt: skip
    for max_length in (16, 128, 256):
        for text, pair in pairs:
            a, b = encode(reference, text, pair, max_length), encode(ours, text, pair, max_length)
            assert list(b["input_ids"]) == list(a["input_ids"])
            assert list(b["token_type_ids"]) == list(a["token_type_ids"])
            assert [tuple(o) for o in b["offset_mapping"]] == [tuple(o) for o in a["offset_mapping"]]
            assert b.sequence_ids() == a.sequence_ids()


def test_an_onnx_tagger_does_not_import_torch(tmp_path: Path) -> None:
    """Once its graph is exported (here, by this process into ``tmp_path``), a worker tagging on ONNX never
    imports torch."""
    import os
    import subprocess

    Tagger(MODELS_DIR / "turn-tagger", runtime="onnx", threads=1, onnx_cache_dir=tmp_path).tag([("a", "b")])
    code = (
        "import sys; from keproxy.corrections.model import Tagger, MODELS_DIR; "
        "t = Tagger(MODELS_DIR / 'turn-tagger', runtime='onnx', threads=1); "
        "t.tag([('Actually, it is at 4pm.', 'The meeting is at 3pm.')]); "
        "assert t.active_runtime == 'onnx', t.active_runtime; print('torch' in sys.modules)"
    )
    env = {**os.environ, "KEPROXY_ONNX_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_export_in_child_writes_the_missing_graphs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from keproxy.corrections.onnx_tagger import export_in_child, graph_path

    monkeypatch.setenv("KEPROXY_ONNX_CACHE", str(tmp_path))  # the child process inherits it
    folders = [MODELS_DIR / "turn-tagger"]
    assert export_in_child(folders) == folders and graph_path(folders[0]).is_file()
    assert export_in_child(folders) == []  # already there: nothing to do
