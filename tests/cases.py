"""Test data written for these tests (not taken from any benchmark), and the one skip rule for shared data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keproxy.datasets import shared_data_dir
from keproxy.eval.postedit.data import EditCase
from keproxy.memory.importers import counterfact_edit

__all__ = [
    "COUNTERFACT_RECORDS",
    "COUNTERFACT_TRAIN_RECORDS",
    "counterfact_case",
    "needs_shared_data",
    "write_counterfact_eval",
]

#: Tests that read ../shared/data (public benchmarks, dev sets) skip without it, saying so.
needs_shared_data = pytest.mark.skipif(
    shared_data_dir() is None,
    reason="needs the shared data folder (../shared/data or $KEPROXY_SHARED_DATA); absent here",
)

_RECORD = {
    "case_id": 900001,
    "subject": "Halvard Brekke",
    "prompt": "The mother tongue of Halvard Brekke is",
    "ground_truth": "Norwegian",
    "target_new": "Portuguese",
    "rephrase_prompt": "In Halvard Brekke's childhood home, people spoke",
    "locality_prompt": "The mother tongue of Ines Varga is",
    "locality_ground_truth": "Hungarian",
}


#: Five CounterFact-format records (EasyEdit layout), invented; case 0 is the one whose true object is French.
COUNTERFACT_RECORDS: list[dict[str, object]] = [
    {"case_id": 0, "subject": "Marielle Vautrin", "prompt": "The mother tongue of Marielle Vautrin is",
     "ground_truth": "French", "target_new": "English",
     "rephrase_prompt": "Growing up, Marielle Vautrin spoke at home the language of",
     "locality_prompt": "The mother tongue of Tomasz Wielgosz is", "locality_ground_truth": "Polish"},
    {"case_id": 1, "subject": "Orrin Castellane", "prompt": "Orrin Castellane plays the position of",
     "ground_truth": "goalkeeper", "target_new": "midfielder",
     "rephrase_prompt": "On the pitch, Orrin Castellane is deployed as a",
     "locality_prompt": "Bram Okafor plays the position of", "locality_ground_truth": "defender"},
    {"case_id": 2, "subject": "Velmora Records", "prompt": "Velmora Records was founded in the city of",
     "ground_truth": "Chicago", "target_new": "Lisbon",
     "rephrase_prompt": "The record label Velmora Records has its origins in",
     "locality_prompt": "Quillstone Press was founded in the city of", "locality_ground_truth": "Boston"},
    {"case_id": 3, "subject": "Dagny Hallvard", "prompt": "Dagny Hallvard works in the field of",
     "ground_truth": "astronomy", "target_new": "botany",
     "rephrase_prompt": "The research area of Dagny Hallvard is",
     "locality_prompt": "Priya Nandakumar works in the field of", "locality_ground_truth": "chemistry"},
    {"case_id": 4, "subject": "Kestrel Bay", "prompt": "Kestrel Bay is located in the country of",
     "ground_truth": "Canada", "target_new": "Chile",
     "rephrase_prompt": "The coastline of Kestrel Bay belongs to",
     "locality_prompt": "Mount Ardvane is located in the country of", "locality_ground_truth": "Scotland"},
]  # fmt: skip


#: Three CounterFact-format training records (the ``counterfact-val.json`` split: IKE's demonstration library),
#: invented; none shares a subject with :data:`COUNTERFACT_RECORDS`.
COUNTERFACT_TRAIN_RECORDS: list[dict[str, object]] = [
    _RECORD,
    {"case_id": 900002, "subject": "Corvane Athletic", "prompt": "Corvane Athletic plays its home games in",
     "ground_truth": "Leeds", "target_new": "Porto",
     "rephrase_prompt": "The home ground of Corvane Athletic is in",
     "locality_prompt": "Hollin Rovers plays its home games in", "locality_ground_truth": "York"},
    {"case_id": 900003, "subject": "Sabel Quartet", "prompt": "The Sabel Quartet was formed in",
     "ground_truth": "Vienna", "target_new": "Oslo",
     "rephrase_prompt": "The city where the Sabel Quartet first played together is",
     "locality_prompt": "The Arden Trio was formed in", "locality_ground_truth": "Dublin"},
]  # fmt: skip


def write_counterfact_eval(root: Path) -> Path:
    """Lay :data:`COUNTERFACT_RECORDS` out as a shared data folder's CounterFact eval file under ``root``, and
    :data:`COUNTERFACT_TRAIN_RECORDS` as its training file; returns ``root`` (point ``$KEPROXY_SHARED_DATA`` at
    it)."""
    folder = root / "counterfact"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "counterfact-edit.json").write_text(json.dumps(COUNTERFACT_RECORDS), encoding="utf-8")
    (folder / "counterfact-val.json").write_text(json.dumps(COUNTERFACT_TRAIN_RECORDS), encoding="utf-8")
    return root


def counterfact_case() -> EditCase:
    """One CounterFact-format case (EasyEdit layout), invented for the tests."""
    r = _RECORD
    return EditCase(
        "counterfact:900001",
        counterfact_edit(r, id="edit_cf900001"),
        {"simple": r["prompt"], "rephrase": r["rephrase_prompt"], "oos": r["locality_prompt"]},
    )
