"""Test data written for these tests (not taken from any benchmark), and the one skip rule for shared data."""

from __future__ import annotations

import pytest

from keproxy.datasets import shared_data_dir
from keproxy.eval.postedit_data import EditCase
from keproxy.memory.importers import counterfact_edit

__all__ = ["counterfact_case", "needs_shared_data"]

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


def counterfact_case() -> EditCase:
    """One CounterFact-format case (EasyEdit layout), invented for the tests."""
    r = _RECORD
    return EditCase(
        "counterfact:900001",
        counterfact_edit(r, id="edit_cf900001"),
        {"simple": r["prompt"], "rephrase": r["rephrase_prompt"], "oos": r["locality_prompt"]},
    )
