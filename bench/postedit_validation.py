"""Post-editors on the hand-labelled judge validation set (issue 18: TE on free-text edits; benchmark script).

Each (edit, text) pair of ``keproxy/data/judge-validation/`` is post-edited as if ``text`` were the upstream's
answer and ``edit`` the retrieved edit (query: the text itself, so the triple locality rule sees the subject when
the text names it). The hand label says what a post-editor should do: a text that *contradicts* the edit must be
edited (necessary for TE: an unedited contradicting answer keeps the old fact), a text that *entails* it or is
*unrelated* must come back byte for byte (retention: postEdit's TR asks for the unchanged answer there).
For triple edits, "o* stated" counts edited contradicting texts that now name the new object.

    PYTHONPATH=$PWD .venv/bin/python bench/postedit_validation.py --editors span,located
"""

from __future__ import annotations

import argparse
import collections
import time

from keproxy.editors.postedit import LocatedPostEditor, SpanPostEditor
from keproxy.editors.postedit.span import mentions
from keproxy.eval.judges import load_judge_set
from keproxy.memory.edits import Edit


def as_edit(row) -> Edit:  # type: ignore[no-untyped-def]
    if row.edit_kind == "triple":
        return Edit(kind="triple", text=row.edit, subject=row.subject, target_new=row.object)
    return Edit(kind="text", text=row.edit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--editors", default="span,located")
    args = parser.parse_args()
    rows = load_judge_set()
    editors = {"span": SpanPostEditor(), "located": LocatedPostEditor(threads=1)}
    print(f"{len(rows)} pairs; n per cell in brackets\n")
    print(
        "| editor | edit kind | contradicts: edited | contradicts: o* stated | entails: unchanged "
        "| unrelated: unchanged | ms / pair |"
    )
    print("|---|---|--:|--:|--:|--:|--:|")
    for name in args.editors.split(","):
        editor = editors[name]
        cells: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
        stated: dict[str, list[int]] = collections.defaultdict(list)
        started = time.perf_counter()
        for row in rows:
            result = editor.apply(row.text, row.text, as_edit(row))
            out = result.apply(row.text)
            changed = int(out != row.text)
            for kind in (row.edit_kind, "all"):
                cells[(kind, row.label)].append(changed)
                if row.label == "contradicts" and row.object and changed:
                    stated[kind].append(int(mentions(out, row.object)))
        ms = (time.perf_counter() - started) * 1000 / len(rows)

        def pct(values: list[int], invert: bool = False) -> str:
            if not values:
                return "-"
            share = sum(values) / len(values)
            return f"{100 * (1 - share if invert else share):.1f} ({len(values)})"

        for kind in ("triple", "free-text", "all"):
            print(
                f"| {name} | {kind} | {pct(cells[(kind, 'contradicts')])} | {pct(stated[kind])} | "
                f"{pct(cells[(kind, 'entails')], True)} | {pct(cells[(kind, 'unrelated')], True)} | {ms:.1f} |"
            )


if __name__ == "__main__":
    main()
