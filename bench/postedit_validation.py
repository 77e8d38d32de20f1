"""Post-editors on the hand-labelled judge validation set (issue 18: TE on free-text edits; benchmark script).

Each (edit, text) pair of ``keproxy/data/judge-validation/`` is post-edited as if ``text`` were the upstream's
answer and ``edit`` the retrieved edit (query: the text itself, so the triple locality rule sees the subject when
the text names it). The hand label says what a post-editor should do: a text that *contradicts* the edit must be
edited (necessary for TE: an unedited contradicting answer keeps the old fact), a text that *entails* it or is
*unrelated* must come back byte for byte (retention: postEdit's TR asks for the unchanged answer there).
For triple edits, "o* stated" counts edited contradicting texts that now name the new object.

The hand-written post-editing rows' dev groups (``keproxy/data/postedit/``, never trained on) carry gold
targets and are scored against them (:func:`hand_dev`). ``local`` is the trained post-editor as a merged GGUF.

    PYTHONPATH=$PWD .venv/bin/python bench/postedit_validation.py --editors span,located
    PYTHONPATH=$PWD .venv/bin/python bench/postedit_validation.py --editors span,located,local \
        --local-gguf artifacts/post-editor.gguf
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Callable

from keproxy.editors.postedit import LocatedPostEditor, SpanPostEditor
from keproxy.editors.postedit.span import mentions
from keproxy.eval.judges import load_judge_set
from keproxy.memory.edits import Edit


def as_edit(row) -> Edit:  # type: ignore[no-untyped-def]
    if row.edit_kind == "triple":
        return Edit(kind="triple", text=row.edit, subject=row.subject, target_new=row.object)
    return Edit(kind="text", text=row.edit)


Editor = Callable[[str, str, Edit], str]


def _local_gguf(path: str, max_new_tokens: int, threads: int = 2) -> tuple[Editor, Editor]:
    """The trained post-editor from a merged GGUF (llama.cpp) as (query, text, edit) -> y_e: as generated, and
    projected onto the text as a minimal edit (:func:`keproxy.editors.postedit.minimal.minimal_edit`)."""
    from keproxy.editors.postedit import fill_t_edit
    from keproxy.editors.postedit.llm import parse_output
    from keproxy.editors.postedit.local_gguf import GgufPostEditor
    from keproxy.editors.postedit.minimal import minimal_edit

    model = GgufPostEditor(path, n_threads=threads, max_new_tokens=max_new_tokens)
    outputs: dict[str, str] = {}  # local and local-minimal share one generation per prompt

    def generate(prompt: str) -> str:
        if prompt not in outputs:
            outputs[prompt] = model.generate(prompt)
        return outputs[prompt]

    def edit(query: str, text: str, fact: Edit) -> str:
        return parse_output(generate(fill_t_edit(fact, query, text)), text).apply(text)

    def edit_minimally(query: str, text: str, fact: Edit) -> str:
        return minimal_edit(text, edit(query, text, fact)) or text

    return edit, edit_minimally


def _editors(
    names: list[str], gguf: str | None, max_new_tokens: int
) -> dict[str, Callable[[str, str, Edit], str]]:
    rules = {"span": SpanPostEditor(), "located": LocatedPostEditor(threads=1)}
    out: dict[str, Callable[[str, str, Edit], str]] = {}
    local: tuple[Editor, Editor] | None = None
    for name in names:
        if name in ("local", "local-minimal"):
            if gguf is None:
                raise SystemExit(f"--editors {name} needs --local-gguf FILE (keproxy train editor-gguf)")
            local = local or _local_gguf(gguf, max_new_tokens)
            out[name] = local[name == "local-minimal"]
        else:
            editor = rules[name]
            out[name] = lambda q, t, e, editor=editor: editor.apply(q, t, e).apply(t)  # type: ignore[misc]
    return out


def _pct(values: list[int], invert: bool = False) -> str:
    if not values:
        return "-"
    share = sum(values) / len(values)
    return f"{100 * (1 - share if invert else share):.1f} ({len(values)})"


def judge_set(editors: dict[str, Callable[[str, str, Edit], str]]) -> None:
    """The judge validation set: contradicting texts edited, the others unchanged."""
    rows = load_judge_set()
    print(f"{len(rows)} pairs; n per cell in brackets\n")
    print(
        "| editor | edit kind | contradicts: edited | contradicts: o* stated | entails: unchanged "
        "| unrelated: unchanged | ms / pair |"
    )
    print("|---|---|--:|--:|--:|--:|--:|")
    for name, editor in editors.items():
        cells: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
        stated: dict[str, list[int]] = collections.defaultdict(list)
        started = time.perf_counter()
        for row in rows:
            out = editor(row.text, row.text, as_edit(row))
            changed = int(out != row.text)
            for kind in (row.edit_kind, "all"):
                cells[(kind, row.label)].append(changed)
                if row.label == "contradicts" and row.object and changed:
                    stated[kind].append(int(mentions(out, row.object)))
        ms = (time.perf_counter() - started) * 1000 / len(rows)
        for kind in ("triple", "free-text", "all"):
            print(
                f"| {name} | {kind} | {_pct(cells[(kind, 'contradicts')])} | {_pct(stated[kind])} | "
                f"{_pct(cells[(kind, 'entails')], True)} | {_pct(cells[(kind, 'unrelated')], True)} | {ms:.1f} |"
            )


def hand_dev(editors: dict[str, Callable[[str, str, Edit], str]]) -> None:
    """The hand-written post-editing rows' dev groups (never trained on), which carry gold targets: a
    contradicting response is right when y_e equals the target ("exact"), and its value is fixed when y_e states
    the new value and no longer the old one ("TE"); "kept" is the share of the response's characters outside
    the gold change that y_e keeps (1 - extra changed characters / length). Entailing and unrelated responses
    must come back unchanged."""
    from keproxy.eval.chats.metrics import changed_chars
    from keproxy.train.editor.hand import load_hand_rows

    rows = [r for r in load_hand_rows() if r.split == "dev"]
    print(f"\nhand-written dev groups: {len(rows)} rows, {len({r.group for r in rows})} groups\n")
    print("| editor | length | contradicts: TE | contradicts: exact | contradicts: kept | entails: unchanged "
          "| unrelated: unchanged |")  # fmt: skip
    print("|---|---|--:|--:|--:|--:|--:|")
    for name, editor in editors.items():
        te: dict[str, list[int]] = collections.defaultdict(list)
        exact: dict[str, list[int]] = collections.defaultdict(list)
        kept: dict[str, list[float]] = collections.defaultdict(list)
        same: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
        for row in rows:
            kind = "event" if row.edit_kind == "event" else "text"
            out = editor(row.query, row.response, Edit(kind=kind, text=row.edit))
            for length in (row.length if row.length != "medium" else "short", "all"):
                if row.label == "contradicts" and row.target and row.old_value and row.new_value:
                    fixed = row.new_value in out and out.count(row.old_value) < row.response.count(
                        row.old_value
                    )
                    te[length].append(int(fixed))
                    exact[length].append(int(out == row.target))
                    extra = max(0, changed_chars(row.response, out) - changed_chars(row.response, row.target))
                    kept[length].append(max(0.0, 1 - extra / len(row.response)))
                else:
                    same[(length, row.label)].append(int(out == row.response))
        for length in ("short", "long", "all"):
            k = kept[length]
            print(f"| {name} | {length if length != 'short' else 'short+medium'} | {_pct(te[length])} | "
                  f"{_pct(exact[length])} | {100 * sum(k) / max(len(k), 1):.1f} | {_pct(same[(length, 'entails')])} "
                  f"| {_pct(same[(length, 'unrelated')])} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--editors", default="span,located", help="span, located, local (with --local-gguf)")
    parser.add_argument("--local-gguf", default=None, help="merged GGUF of the trained post-editor")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--sets", default="judge,hand-dev", help="judge (validation set), hand-dev")
    args = parser.parse_args()
    editors = _editors(args.editors.split(","), args.local_gguf, args.max_new_tokens)
    sets = args.sets.split(",")
    if "judge" in sets:
        judge_set(editors)
    if "hand-dev" in sets:
        hand_dev(editors)


if __name__ == "__main__":
    main()
