"""Arithmetic written out in an edited turn, recomputed from the corrected operands (derived values).

A correction changes a value; an earlier turn may have computed something from it: "6 hours × £95 = £570",
"12% of $3,400 = $408", "(72 + 85 + 90 + 64 + 78) / 5 = 389 / 5 = 77.8". Once the span edits have changed an
operand ("95" -> "85"), the results written after ``=`` (or ``≈``) are stale as well. :func:`derived_edits`
finds such written equations, checks that the text's own numbers agree with them (so that only real arithmetic
is touched: "Room 4 = 2nd floor" is no equation), evaluates them again with the new operands and rewrites each
result's number in the result's own format (decimals, thousands separators; its currency sign and unit stay).
A changed result is an operand of later equations of the same turn in its turn ("389 / 5 = 77.8", then
"0.6 × 77.8"). Two more written forms are followed: a total of listed amounts ("Total: £234", "$1,646 in
total", when the amounts before it add up to it as written) and a percentage beside its part and whole
("£340k spent of £500k (68%)"). Arithmetic that is not written out ("gives £690", unit conversions) is left as
it is. Expressions are evaluated only after a check that they hold nothing but digits, operators and
parentheses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from keproxy.corrections.base import SpanEdit

__all__ = ["derived_edits", "equations"]

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_TOKEN = re.compile(
    rf"(?P<num>{_NUM})(?P<pct>%)?"
    r"|(?P<op>[+×*/÷−-]|(?<=\s)x(?=\s))"
    r"|(?P<eq>=|≈)"
    r"|(?P<lp>\()|(?P<rp>\))"
    r"|(?P<of>(?<=%)\s+of\b)"
    r"|(?P<cur>[£$€¥₹]|\b[A-Z]{3}(?= ?\d))"
    r"|(?P<unit>(?<=[\d%])[^\W\d_]{1,12}(?=[\s)=,.;:]|$)|(?<=\d )[^\W\d_]{1,12}(?=\s*[+×*/÷−=≈)-]))"
    r"|(?P<space>[ \t]+)"
)
_KINDS = ("num", "op", "eq", "lp", "rp", "of", "cur", "unit", "space")
_OPS = {"+": "+", "-": "-", "−": "-", "×": "*", "x": "*", "*": "*", "/": "/", "÷": "/"}
_ROUNDS = 4  # passes over a turn's equations, so that a changed result reaches the equations using it


@dataclass(frozen=True)
class Number:
    """One number of an equation: ``text[start:end]`` (digits only, no sign or unit), its value, whether a
    ``%`` follows it, and how it is written (decimals, thousands separators)."""

    start: int
    end: int
    value: float
    percent: bool
    decimals: int
    grouped: bool
    trailing_zero: bool = False


@dataclass(frozen=True)
class Equation:
    """A written chain ``E0 = E1 = ... = En``: each side a list of items, a :class:`Number` or an operator
    string ("+", "-", "*", "/", "(", ")", "of")."""

    sides: tuple[tuple[Number | str, ...], ...]


def _number(m: re.Match[str], percent: bool) -> Number:
    """The :class:`Number` of ``m``'s group "num" (a match of :data:`_TOKEN` or :data:`_AMOUNT`)."""
    text = m.group("num")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return Number(m.start("num"), m.end("num"), float(text.replace(",", "")), percent, decimals, "," in text,
                  decimals > 0 and text.endswith("0"))  # fmt: skip


_ASIDE = re.compile(r"\([^()]*[^\W\d_][^()]*\)")


def equations(text: str) -> list[Equation]:
    """The written equation chains of ``text`` (at least two sides, every side a well-formed expression),
    in order. A parenthetical aside with words in it is read as a space ("2 children (9 and 13) × €7.00 =
    €14.00"); offsets stay those of ``text``."""
    text = _ASIDE.sub(lambda m: " " * len(m.group()), text)
    out: list[Equation] = []
    sides: list[tuple[Number | str, ...]] = []
    side: list[Number | str] = []
    at = 0

    def close() -> None:
        nonlocal sides, side
        if side:
            sides.append(tuple(side))
        if len(sides) >= 2 and all(_evaluate(s, {}) is not None for s in sides):
            out.append(Equation(tuple(sides)))
        sides, side = [], []

    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.end() == at:
            close()
            at += 1
            continue
        at = m.end()
        kind = next(name for name in _KINDS if m.group(name) is not None)
        if kind in ("space", "cur", "unit"):
            continue
        if kind == "num":
            side.append(_number(m, bool(m.group("pct"))))
        elif kind == "eq":
            if not side:
                sides, side = [], []
                continue
            sides.append(tuple(side))
            side = []
        elif kind == "op":
            if not side and text[at : at + 1].isspace():
                continue  # a list bullet ("- 2 nights ..."), not a sign
            side.append(_OPS[m.group("op")])
        elif kind in ("lp", "rp"):
            side.append("(" if kind == "lp" else ")")
        elif kind == "of":
            side.append("of")
    close()
    return out


def _evaluate(side: Sequence[Number | str], values: dict[int, float]) -> float | None:
    """The value of one side, with ``values`` (a number's start -> value) in place of the written numbers;
    None when the side is not an arithmetic expression."""
    parts: list[str] = []
    previous: Number | str | None = None
    for item in side:
        if isinstance(item, Number):
            if isinstance(previous, Number):
                return None
            value = values.get(item.start, item.value)
            parts.append(repr(value / 100 if item.percent else value))
        elif item == "of":
            if not (isinstance(previous, Number) and previous.percent):
                return None
            parts.append("*")
        else:
            parts.append(item)
        previous = item
    expression = " ".join(parts)
    if not re.fullmatch(r"[\d.e+\-*/() ]+", expression) or "**" in expression or "//" in expression:
        return None
    try:
        result = eval(expression, {"__builtins__": {}}, {})  # digits, operators and parentheses only
    except (SyntaxError, ZeroDivisionError, TypeError):
        return None
    return float(result) if isinstance(result, (int, float)) else None


def _numbers(side: Sequence[Number | str]) -> list[Number]:
    return [item for item in side if isinstance(item, Number)]


def _agrees(value: float, written: Number) -> bool:
    """Whether ``value`` rounds to the number as written (to its decimals)."""
    return abs(value - written.value) <= 0.5 * 10 ** (-written.decimals) + 1e-9


def _format(value: float, like: Number) -> str | None:
    """``value`` written like ``like`` (its decimals; thousands separators when it has them); None for a
    negative value where a positive one was written."""
    if value < 0 <= like.value:
        return None
    written = f"{value:,.{like.decimals}f}" if like.grouped else f"{value:.{like.decimals}f}"
    if like.decimals and like.decimals != 2 and not like.trailing_zero:
        written = written.rstrip("0").rstrip(".")  # "2.5" -> "2", not "2.0"; money keeps its cents
    return written


def _consistent(equation: Equation) -> bool:
    """Whether every side agrees with the first one, as written (a result rounded to its decimals)."""
    first = _evaluate(equation.sides[0], {})
    if first is None:
        return False
    for side in equation.sides[1:]:
        value = _evaluate(side, {})
        if value is None:
            return False
        numbers = _numbers(side)
        if len(side) == 1 and isinstance(side[0], Number):
            if not _agrees(first, numbers[0]):
                return False
        elif abs(value - first) > 0.5 * 10 ** (-max(n.decimals for n in numbers)) * len(numbers) + 1e-9:
            return False
    return True


def _solve(
    side: Sequence[Number | str], values: dict[int, float], target: float
) -> tuple[Number, float] | None:
    """The leftmost unchanged number of ``side`` and the value that makes ``side`` equal ``target`` (the side
    is linear in one number: two evaluations give the slope); None when no number written like it does."""
    for number in _numbers(side):
        if number.start in values:
            continue
        low = _evaluate(side, {**values, number.start: number.value})
        high = _evaluate(side, {**values, number.start: number.value + 1.0})
        if low is None or high is None or abs(high - low) < 1e-12:
            continue
        value = number.value + (target - low) / (high - low)
        written = _format(value, number)
        if written is None:
            continue
        check = _evaluate(side, {**values, number.start: float(written.replace(",", ""))})
        if check is not None and abs(check - target) <= 0.5 * 10 ** (-number.decimals) * 2 + 1e-9:
            return number, float(written.replace(",", ""))
    return None


_AMOUNT = re.compile(
    rf"(?P<cur>[£$€¥₹]|\b[A-Z]{{3}} )?(?P<num>{_NUM})(?P<suf>%|[^\W\d_]{{1,3}}\b)?(?![.,]?\d)"
)
_PART_OF = re.compile(r"\s*(?:[^\W\d_]+\s+){0,3}(?:out of|of|/)\s*")
_TOTAL_BEFORE = re.compile(
    r"\b(?:sub)?total\b|\bsum\b|\baltogether\b|\bin all\b|\bcomes? to\b", re.IGNORECASE
)
_TOTAL_AFTER = re.compile(r"\s*(?:in )?total\b|\s+altogether\b|\s+in all\b", re.IGNORECASE)


@dataclass(frozen=True)
class Amount:
    """A number written with its currency sign or code and unit (``kind``), e.g. "£96" or "€1.2M"."""

    number: Number
    kind: tuple[str, str]
    parenthetical: bool


def _amounts(text: str) -> list[Amount]:
    out = []
    for m in _AMOUNT.finditer(text):
        number = _number(m, m.group("suf") == "%")
        opened = text.rfind("(", 0, m.start())
        inside = opened > max(text.rfind(")", 0, m.start()), text.rfind("\n", 0, m.start()))
        out.append(
            Amount(number, ((m.group("cur") or "").strip(), (m.group("suf") or "").casefold()), inside)
        )
    return out


def _sentence(text: str, number: Number) -> tuple[int, int]:
    """(start, end) of the line or sentence of ``text`` that holds ``number``."""
    start = max(text.rfind("\n", 0, number.start), text.rfind(". ", 0, number.start)) + 1
    ends = (text.find("\n", number.end), text.find(". ", number.end))
    return start, min((i for i in ends if i >= 0), default=len(text))


def _is_total(text: str, number: Number) -> bool:
    """Whether the text calls ``number`` a total ("Total: £234", "$1,646 in total")."""
    before = text[max(_sentence(text, number)[0], number.start - 40) : number.start]
    return bool(_TOTAL_BEFORE.search(before) or _TOTAL_AFTER.match(text, number.end))


def _total_items(text: str, total: Amount, amounts: Sequence[Amount], operands: set[int]) -> list[Number]:
    """The amounts that a written total adds up: the longest run of the same kind's amounts written before it
    whose sum is the total as written (leaving out, if that is what makes the sum, parenthetical amounts
    "(about £80/day)" and the operands of a written equation whose result is listed); empty when none."""
    same = [a for a in amounts if a.kind == total.kind and a.number.end <= total.number.start]
    for left_out in ((), ("parenthetical",), ("operand",), ("parenthetical", "operand")):
        items = [
            a.number for a in same
            if not ("parenthetical" in left_out and a.parenthetical)
            and not ("operand" in left_out and a.number.start in operands)
        ]  # fmt: skip
        for k in range(len(items), 1, -1):
            if _agrees(sum(n.value for n in items[-k:]), total.number):
                return items[-k:]
    return []


def derived_edits(texts: Sequence[str], edits: Sequence[SpanEdit]) -> list[SpanEdit]:
    """Span edits for the written results that ``edits`` make stale (see the module docstring): results of
    written equations, and written totals ("Total: £234") of listed amounts whose sum they are. Each edit
    carries the correction of the edit it follows from; offsets into ``texts[turn]``; none overlaps
    ``edits``."""
    out: list[SpanEdit] = []
    for turn in sorted({e.turn_index for e in edits}):
        mine = [e for e in edits if e.turn_index == turn]
        out += _Derivation(texts[turn]).edits(turn, mine)
    return sorted(out, key=lambda e: (e.turn_index, e.start))


class _Derivation:
    """One turn's written equations and totals, and the numbers that the edits change (by digit offset)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.chains = [q for q in equations(text) if _consistent(q)]
        self.amounts = _amounts(text)
        self.totals = [a for a in self.amounts if _is_total(text, a.number)]
        self.shares = [a for a in self.amounts if a.kind[1] == "%"]
        self.operands = {n.start for q in self.chains for n in _numbers(q.sides[0]) if len(q.sides[0]) > 1}
        self.in_chains = {n.start: n for q in self.chains for side in q.sides for n in _numbers(side)}
        self.numbers = {**{a.number.start: a.number for a in self.amounts}, **self.in_chains}
        self.grouped = bool(re.search(r"\d,\d{3}(?!\d)", text))  # the turn writes thousands separators
        self.values: dict[int, float] = {}
        self.source: dict[int, int] = {}
        self.changed: dict[int, float] = {}

    def edits(self, turn: int, edits: Sequence[SpanEdit]) -> list[SpanEdit]:
        if not self.chains and not self.totals and not self.shares:
            return []
        for e in edits:
            new, old = re.findall(_NUM, e.after), re.findall(_NUM, e.before)
            if len(new) == 1 and len(old) == 1:
                for n in self.numbers.values():
                    if e.start <= n.start and n.end <= e.end:
                        self.values[n.start] = float(new[0].replace(",", ""))
                        self.source[n.start] = e.correction
        for _ in range(_ROUNDS):
            before = len(self.values)
            for q in self.chains:
                self._recompute(q)
            for total in self.totals:
                self._add_up(total)
            for share in self.shares:
                self._divide(share)
            if len(self.values) == before:
                break
        out = []
        for start, value in self.changed.items():
            number = self.numbers[start]
            written = _format(value, replace(number, grouped=number.grouped or self.grouped))
            was = self.text[number.start : number.end]
            if written is None or written == was:
                continue
            if any(e.start < number.end and number.start < e.end for e in edits):
                continue
            out.append(SpanEdit(turn, number.start, number.end, was, written, self.source[start]))
        return out

    def _change(self, number: Number, value: float, correction: int) -> None:
        self.values[number.start] = value
        self.source[number.start] = correction
        self.changed[number.start] = value
        # the same result written again later as an operand of an equation ("= 77.8", then "0.6 × 77.8")
        written = self.text[number.start : number.end]
        for other in self.in_chains.values():
            later = other.start > number.start and other.start not in self.values
            if later and self.text[other.start : other.end] == written:
                self.values[other.start] = value
                self.source[other.start] = correction
                self.changed[other.start] = value

    def _recompute(self, q: Equation) -> None:
        """Evaluate ``q``'s first side with the changed operands and carry the value to its other sides."""
        moved = [n for n in _numbers(q.sides[0]) if n.start in self.values]
        target = _evaluate(q.sides[0], self.values) if moved else None
        if target is None:
            return
        for side in q.sides[1:]:
            numbers = _numbers(side)
            if len(side) == 1 and isinstance(side[0], Number):
                number, value = numbers[0], target
            else:
                if all(n.start in self.values for n in numbers):
                    continue
                solved = _solve(side, self.values, target)
                if solved is None:
                    return
                number, value = solved
            if number.start not in self.values:
                self._change(number, value, self.source[moved[0].start])

    def _add_up(self, total: Amount) -> None:
        """A written total of listed amounts moves by what its changed amounts moved."""
        if total.number.start in self.values:
            return
        items = _total_items(self.text, total, self.amounts, self.operands)
        moved = [n for n in items if n.start in self.values]
        if moved:
            delta = sum(self.values[n.start] - n.value for n in moved)
            self._change(total.number, total.number.value + delta, self.source[moved[0].start])

    def _divide(self, share: Amount) -> None:
        """A percentage written beside the part and the whole it is the ratio of ("£340k spent of £500k (68%)")
        moves with them: the one pair of amounts of one kind in its sentence whose ratio it is, as written (bare
        numbers only when written "x of y" or "x/y": "3 days ... 15 October" is no 20%)."""
        if share.number.start in self.values:
            return
        start, stop = _sentence(self.text, share.number)
        near = [a for a in self.amounts if a.kind[1] != "%" and start <= a.number.start < stop]
        pairs = [
            (x.number, y.number) for x in near for y in near
            if x.number.value < y.number.value and x.kind == y.kind
            and _agrees(100 * x.number.value / y.number.value, share.number)
            and (x.kind != ("", "") or _PART_OF.fullmatch(self.text, x.number.end, y.number.start) is not None)
        ]  # fmt: skip
        if len(pairs) != 1:
            return
        x, y = pairs[0]
        moved = [n for n in (x, y) if n.start in self.values]
        if moved:
            part, whole = (self.values.get(n.start, n.value) for n in (x, y))
            if whole > 0:
                self._change(share.number, 100 * part / whole, self.source[moved[0].start])
