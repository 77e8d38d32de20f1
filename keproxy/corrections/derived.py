"""Derived values: the numbers of an edited turn that were computed from a corrected one, recomputed.

A correction changes a value; an earlier turn may have computed something from it. Once the span edits have
changed an operand ("95" -> "85"), :func:`derived_edits` rewrites, in the result's own format (decimals,
thousands separators; its currency sign and unit stay):

- the results of written equations (:mod:`keproxy.corrections.arithmetic`): "6 hours × £95 = £570";
- a written total of listed amounts ("Total: £234", "$1,646 in total", when the amounts before it add up to it
  as written);
- a percentage written after its part and whole ("£340k spent of £500k (68%)");
- a result in prose: a number written after the changed one in its paragraph (or the next), presented as a
  result ("gives £690", "about $188 per head", "£264 total", or the last cell of a table row) and explained, as
  written, by one operation on the changed number and one number written before it: sums and differences of
  amounts of one kind, products and quotients with a bare count, a multiplier ("2x") or a percentage, a
  conversion at a written rate ("€600 is roughly £510"). It changes only when every explanation gives the same
  new value; times, dates, years, identifiers ("Terminal 1") and code are no operands.

A changed result is an operand of later derivations of the same turn in its turn ("389 / 5 = 77.8", then
"0.6 × 77.8"). Arithmetic with constants the text does not write (unit conversions, loan payments, calendar
dates) is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from keproxy.corrections.arithmetic import (
    NUM,
    Equation,
    Number,
    agrees,
    equations,
    evaluate,
    exactly,
    format_like,
    numbers_of,
    parse_number,
    pieces,
    solve,
    termwise,
    word_numbers,
)
from keproxy.corrections.base import SpanEdit
from keproxy.corrections.consolidate import distinctive
from keproxy.corrections.formats import MONTH_PREFIX

__all__ = ["derived_edits"]

_ROUNDS = 6  # passes over a turn's derivations, so that a changed result reaches those using it


_AMOUNT = re.compile(
    rf"(?P<cur>[£$€¥₹]|\b[A-Z]{{3}} )?(?P<num>{NUM})(?P<suf>%|[^\W\d_]{{1,3}}\b)?(?![.,]?\d)"
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
        number = parse_number(m, m.group("suf") == "%")
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
    start = max(_sentence(text, number)[0], number.start - 40)
    previous = [m.end() for m in re.finditer(NUM, text[start : number.start])]
    before = text[start + (previous[-1] if previous else 0) : number.start]
    return bool(_TOTAL_BEFORE.search(before) or _TOTAL_AFTER.match(text, number.end))


def _itemised(text: str, number: Number) -> bool:
    """Whether a bracket right after ``number`` adds up items ("about £2,450 (damp £1,850 + fence £600)"): the
    number is then a total, called one or not (:func:`_total_items` checks the sum)."""
    m = re.match(r"[^\W\d_]*\s?\(([^()]*)\)", text[number.end :])
    return m is not None and " + " in m.group(1)


def _total_items(text: str, total: Amount, amounts: Sequence[Amount], operands: set[int]) -> list[Number]:
    """The amounts that a written total adds up: the longest run of the same kind's amounts written before it
    whose sum is the total as written (leaving out, if that is what makes the sum, parenthetical amounts
    "(about £80/day)" and the operands of a written equation whose result is listed), else the last cells of the
    table rows before it, else those in brackets right after it when they sum to it; empty when none."""
    same = [a for a in amounts if a.kind == total.kind and a.number.end <= total.number.start]
    for left_out in ((), ("parenthetical",), ("operand",), ("parenthetical", "operand")):
        items = [
            a.number for a in same
            if not ("parenthetical" in left_out and a.parenthetical)
            and not ("operand" in left_out and a.number.start in operands)
        ]  # fmt: skip
        for k in range(len(items), 1, -1):
            if agrees(sum(n.value for n in items[-k:]), total.number):
                return items[-k:]
    # the last cells of a table's rows ("| Hosting | 6 | €59.00 | €354.00 |"), the unit prices left out
    rows = [a.number for a in same if _row_end(text, a.number)]
    for k in range(len(rows), 1, -1):
        if agrees(sum(n.value for n in rows[-k:]), total.number):
            return rows[-k:]
    # the items listed in brackets right after it: "€930 (hotel €420 + flights €310 + food €200)"
    opened = re.match(r"[^\W\d_]*\s?\(", text[total.number.end :])
    if opened is not None:
        close = text.find(")", total.number.end + opened.end())
        inside = [
            a.number for a in amounts
            if a.kind == total.kind and total.number.end + opened.end() <= a.number.start and a.number.end <= close
        ]  # fmt: skip
        if len(inside) > 1 and agrees(sum(n.value for n in inside), total.number):
            return inside
    return []


_EQUIVALENT = re.compile(
    rf"\s?(?P<unit_x>[^\W\d_]{{0,6}})\s?\(\s*(?:(?:about|approx\.?|roughly|around|circa|ca\.)\s+|[~≈]\s?)?"
    rf"(?P<cur>[£$€¥₹])?(?P<num>{NUM})\s?(?P<unit_y>[^\W\d_]{{1,6}})?\s*\)"
)
_BARE = ("", "")
_TIMES = ("", "x")  # "2x fullness"
_MONTH = re.compile(MONTH_PREFIX + r"\.?", re.IGNORECASE)


def _plain(text: str, amount: Amount) -> bool:
    """Whether ``amount`` is a quantity that prose arithmetic can be about: not in code, not part of a time, a
    date, a year, an identifier, a version or a range."""
    n = amount.number
    if text.count("```", 0, n.start) % 2 or text.count("`", 0, n.start) % 2:
        return False
    before, after = text[max(0, n.start - 12) : n.start], text[n.end : n.end + 12]
    if re.search(r"[\w#/:.\-–]$", before) and not re.search(r"[£$€¥₹]$|[A-Z]{3} $", before):
        return False  # "TN-4482", "#12", "v3", "12:15", "3.1.2", "5-8"
    if re.match(r"[:/\-–]\d|\.\d", after) or amount.kind[1] in ("st", "nd", "rd", "th"):
        return False
    named = re.search(r"(\S?)(\s*)[A-Z][a-z]+ $", text[max(0, n.start - 40) : n.start])
    if named and amount.kind == _BARE and named.group(2) == " " and named.group(1) not in ".!?:|>*-":
        return False  # a name's number, not at a sentence's start: "Terminal 1", "Room 204"
    if re.match(r"\s*(?:st|nd|rd|th)?\s+" + _MONTH.pattern, after, re.IGNORECASE):
        return False
    if re.search(_MONTH.pattern + r"\s+$", before, re.IGNORECASE):
        return False
    return not (amount.kind == _BARE and n.decimals == 0 and 1900 <= n.value <= 2100)


_RESULT_BEFORE = re.compile(
    r"=|≈|~|\bi\.e\.|\b(?:total|sum|gives?|giving|comes? to|coming to|makes?|leaving|brings?|works? out|"
    r"profit|net|in all|altogether|equals?|is|are|was|were|so|that's|about|roughly|around|approximately|leaves?|"
    r"nearly|almost|just over|just under|earn|earns|pay|pays|cost|costs|saving|saves)\b",
    re.IGNORECASE,
)
_RESULT_AFTER = re.compile(
    r"\W{0,3}(?:in )?(?:total|together|in all|altogether|combined|each|a head|per (?:head|person|guest))\b",
    re.IGNORECASE,
)


def _row_end(text: str, number: Number) -> bool:
    """Whether ``number`` is the last number of a markdown table row ("| Development | 32 h | €95 | €3,040.00 |")."""
    start = text.rfind("\n", 0, number.start) + 1
    end = text.find("\n", number.end)
    end = len(text) if end < 0 else end
    return text.startswith("|", start) and re.search(r"\d", text[number.end : end]) is None


def _unit_of(text: str) -> str:
    """The word written right after the number of ``text`` ("kg" in "1 kg"), casefolded; "" when none."""
    m = re.search(rf"(?:{NUM})\s?([^\W\d_]+)", text)
    return m.group(1).casefold() if m else ""


def _unit_len(text: str, number: Number) -> int:
    m = re.match(r"[^\W\d_]{1,3}\b|\s?[^\W\d_]+", text[number.end :])
    return m.end() if m else 0


def _paragraphs(text: str, number: Number) -> tuple[int, int]:
    """(start, end) of the paragraph (lines between blank lines) of ``text`` that holds ``number`` and of the
    paragraph after it (a table, then the sentence that sums it up)."""
    start = text.rfind("\n\n", 0, number.start)
    end = text.find("\n\n", number.end)
    end = text.find("\n\n", end + 2) if end >= 0 else -1
    return (0 if start < 0 else start + 2), (len(text) if end < 0 else end)


def _explanations(
    x: Amount, xo: float, xn: float, c: Amount, co: float, cn: float, y: Amount, together: bool
) -> list[tuple[float, float]]:
    """(value as written, value after the change) of each one-operation expression of ``x`` and ``c`` whose
    kinds fit ``y``'s; bare numbers multiply only ``together`` in one sentence ("12 m ..., 5 per metre, so 60
    plants")."""
    out = []
    if x.kind == c.kind == y.kind and x.kind[1] != "%" and (x.kind != _BARE or together):
        out += [(xo + co, xn + cn), (xo - co, xn - cn), (co - xo, cn - xn)]
    if x.kind == c.kind == y.kind == _BARE and together:
        out += [(xo * co, xn * cn)]
    for a, (ao, an), b, (bo, bn) in ((x, (xo, xn), c, (co, cn)), (c, (co, cn), x, (xo, xn))):
        converted = a.kind[0] != y.kind[0] and a.kind[0] and y.kind[0]  # at a written exchange rate
        if (
            b.kind in (_BARE, _TIMES)
            and (a.kind == y.kind or converted)
            and a.kind != _BARE
            and a.kind[1] != "%"
        ):
            out += [(ao * bo, an * bn)]
            if a is x:
                out += [(ao / bo, an / bn)]
        if b.kind[1] == "%" and a.kind == y.kind and a.kind[1] != "%":
            out += [(ao * bo / 100, an * bn / 100)]
    return out


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
        self.chains = [piece for q in equations(text) for piece in pieces(q)]
        self.amounts = _amounts(text)
        self.totals = [a for a in self.amounts if _is_total(text, a.number) or _itemised(text, a.number)]
        self.shares = [a for a in self.amounts if a.kind[1] == "%"]
        self.operands = {n.start for q in self.chains for n in numbers_of(q.sides[0]) if len(q.sides[0]) > 1}
        self.in_chains = {n.start: n for q in self.chains for side in q.sides for n in numbers_of(side)}
        self.numbers = {**{a.number.start: a.number for a in self.amounts}, **self.in_chains}
        self.grouped = bool(re.search(r"\d,\d{3}(?!\d)", text))  # the turn writes thousands separators
        self.plain = [a for a in self.amounts if _plain(text, a)]
        # counts written as words divide ("split three ways"), multipliers ("twice") also multiply; never results
        self.words = [Amount(n, _TIMES if times else _BARE, False) for n, times in word_numbers(text)]
        self.values: dict[int, float] = {}
        self.given: set[int] = set()  # the numbers the edits change; the others are derived, and re-derived
        self.source: dict[int, int] = {}
        self.changed: dict[int, float] = {}
        self.exact: set[int] = set()  # results written as computed, not rounded: written exactly again

    def edits(self, turn: int, edits: Sequence[SpanEdit]) -> list[SpanEdit]:
        if not self.chains and not self.totals and not self.shares and len(self.plain) < 3:
            return []
        for e in edits:
            new, old = re.findall(NUM, e.after), re.findall(NUM, e.before)
            if len(new) == 1 and len(old) == 1 and _unit_of(e.before) == _unit_of(e.after):
                for n in self.numbers.values():
                    if e.start <= n.start and n.end <= e.end:
                        self.values[n.start] = float(new[0].replace(",", ""))
                        self.given.add(n.start)
                        self.source[n.start] = e.correction
                self._operand_copies(e, float(old[0].replace(",", "")), float(new[0].replace(",", "")))
        for _ in range(_ROUNDS):
            before = dict(self.values)
            for q in self.chains:
                self._recompute(q)
            for total in self.totals:
                self._add_up(total)
            for share in self.shares:
                self._divide(share)
            self._relate()
            self._convert()
            if self.values == before:
                break
        out = []
        for start, value in self.changed.items():
            number = exactly(self.numbers[start], value, self.text, start in self.exact)
            written = format_like(value, replace(number, grouped=number.grouped or self.grouped))
            was = self.text[number.start : number.end]
            if written is None or written == was:
                continue
            if any(e.start < number.end and number.start < e.end for e in edits):
                continue
            out.append(SpanEdit(turn, number.start, number.end, was, written, self.source[start]))
        return out

    def _operand_copies(self, edit: SpanEdit, old: float, new: float) -> None:
        """The edited value, written outside arithmetic, written again as an operand of written arithmetic in its
        sentence ("hits the 30s timeout, that's 4 × 30 = 120s") is the same value: it changes too, and the
        arithmetic follows."""
        if any(edit.start <= n.start < edit.end for n in self.in_chains.values()):
            return  # the edit is itself an operand: "2 + 2 = 4" with one 2 corrected keeps the other
        start, end = _sentence(self.text, Number(edit.start, edit.end, old, False, 0, False))
        for n in self.in_chains.values():
            outside = n.end <= edit.start or edit.end <= n.start
            if outside and start <= n.start < end and n.value == old and n.start not in self.values:
                self._change(n, new, edit.correction)

    def _change(self, number: Number, value: float, correction: int) -> None:
        self.values[number.start] = value
        self.source[number.start] = correction
        self.changed[number.start] = value
        # the same result written again later as an operand of an equation ("= 77.8", then "0.6 × 77.8"), or
        # in prose when it is distinctive ("£62.15 each ... each flatmate owes you £62.15")
        written = self.text[number.start : number.end]
        copies = [*self.in_chains.values()]
        if distinctive(written):
            copies += [
                a.number for a in self.plain if self._currency(a.number.start) == self._currency(number.start)
            ]
        for other in copies:
            later = other.start > number.start and other.start not in self.given
            if later and self.text[other.start : other.end] == written:
                self.values[other.start] = value
                self.source[other.start] = correction
                self.changed[other.start] = value

    def _rederive(self, number: Number, value: float, correction: int) -> None:
        """:meth:`_change` for a derived number: not one the edits set, and only when its value moves (a later
        pass derives it again from operands that moved since)."""
        if number.start not in self.given and self.values.get(number.start) != value:
            self._change(number, value, correction)

    def _recompute(self, q: Equation) -> None:
        """Evaluate ``q``'s first side with the changed operands and carry the value to its other sides."""
        moved = [n for n in numbers_of(q.sides[0]) if n.start in self.values]
        target = evaluate(q.sides[0], self.values) if moved else None
        if target is None:
            return
        before = evaluate(q.sides[0], {})  # the first side as written
        for side in q.sides[1:]:
            numbers = numbers_of(side)
            terms = termwise(q.sides[0], side, self.values)
            if terms is not None:  # "0.6 × 77.8 + 0.4 × 88 = 46.68 + 35.2": each term its own result
                for number, value in terms:
                    self._rederive(number, value, self.source[moved[0].start])
                continue
            if len(side) == 1 and isinstance(side[0], Number):
                number, value = numbers[0], 100 * target if numbers[0].percent else target
                if (
                    before is not None
                    and abs((100 * before if number.percent else before) - number.value) < 1e-9
                ):
                    self.exact.add(number.start)
            else:
                if all(n.start in self.values for n in numbers):
                    continue
                solved = solve(side, self.values, target)
                if solved is None:
                    return
                number, value = solved
            self._rederive(number, value, self.source[moved[0].start])

    def _add_up(self, total: Amount) -> None:
        """A written total of listed amounts moves by what its changed amounts moved (again when one of them
        moves in a later pass: "VAT at 21%: €546. Total: €3,146" after the net's change)."""
        if total.number.start in self.given:
            return
        items = _total_items(self.text, total, self.amounts, self.operands)
        moved = [n for n in items if n.start in self.values]
        if moved:
            value = total.number.value + sum(self.values[n.start] - n.value for n in moved)
            self._rederive(total.number, value, self.source[moved[0].start])

    def _relate(self) -> None:
        """A number written after a changed one in its paragraph, and explained as written by one operation on
        it and one other number of the paragraph ("£22 per head (£264 total)", "2,400 CHF is about €2,544",
        "turnover £48,300, expenses £9,150, profit £39,150"), moves with it: sums and differences of amounts of one
        kind; products and quotients with a bare number or a percentage, the result of the other's kind. The
        result is written last and presented as one (:meth:`_reads_as_result`); it changes only when every
        explanation found gives the same new value."""
        for x in [a for a in self.plain if a.number.start in self.values]:
            start, stop = _paragraphs(self.text, x.number)
            near = [a for a in self.plain if start <= a.number.start < stop and a is not x]
            words = [a for a in self.words if start <= a.number.start < stop]
            xo, xn = x.number.value, self.values[x.number.start]
            for y in near:
                if y.number.start < x.number.end or y.number.start in self.values:
                    continue
                if y.number.start in self.in_chains:
                    continue
                presented = self._reads_as_result(y.number)
                if not (presented or _row_end(self.text, y.number)):
                    continue
                found: set[str] = set()
                sentence = _sentence(self.text, y.number)
                for c in near + words:
                    if c.number.start >= y.number.start or c.number.value in (0.0, 1.0):
                        continue  # operands are written before their result
                    if not presented and c.number.start < sentence[0]:
                        continue  # a table row's last cell is a result of a cell of its own row
                    co = c.number.value
                    cn = self.values.get(c.number.start, co)
                    together = sentence[0] <= min(x.number.start, c.number.start)
                    if c in words:  # "split three ways": an amount shared out; "twice": a multiple
                        same = x.kind == y.kind != _BARE and x.kind[1] != "%"
                        explained = [(xo / co, xn / co)] if same else []
                        explained += [(xo * co, xn * co)] if same and c.kind == _TIMES else []
                    else:
                        explained = _explanations(x, xo, xn, c, co, cn, y, together)
                    for old, new in explained:
                        if agrees(old, y.number):
                            exact = abs(old - y.number.value) < 1e-9  # written as computed
                            if exact:
                                self.exact.add(y.number.start)
                            written = format_like(new, exactly(y.number, new, self.text, exact))
                            if written is not None:
                                found.add(written)
                if len(found) == 1:
                    self._change(y.number, float(found.pop().replace(",", "")), self.source[x.number.start])

    def _reads_as_result(self, number: Number) -> bool:
        """Whether the words between the number or the comma, semicolon or bracket written before ``number``
        (within its sentence, at most 30 characters back) and ``number``, or the words just after it, present it as a result: "= £690", "gives
        £690", "about $188 per head", "£264 total"."""
        start = max(_sentence(self.text, number)[0], number.start - 30)
        start = max([start] + [n.end for n in self.numbers.values() if n.end <= number.start])
        start = max(start, *(self.text.rfind(mark, 0, number.start) + 1 for mark in ",;()"))
        after = (number.end, number.end + _unit_len(self.text, number))
        return bool(
            _RESULT_BEFORE.search(self.text, start, number.start)
            or any(_RESULT_AFTER.match(self.text, at) for at in after)
        )

    def _convert(self) -> None:
        """The same quantity written again in brackets in another unit or currency right after a changed one
        ("6000 m (6 km)", "$50 (about £40)") moves in proportion: a conversion between linear units is one
        factor, so the bracket keeps it. Temperatures (an offset, not a factor) are never read: "°" is no
        unit word here."""
        for start, value in list(self.values.items()):
            x = self.numbers.get(start)
            if x is None or not x.value:
                continue
            m = _EQUIVALENT.match(self.text, x.end)
            y = self.numbers.get(m.start("num")) if m is not None else None
            if m is None or y is None or y.start in self.values:
                continue
            x_unit = (self._currency(x.start), m.group("unit_x").casefold())
            y_unit = ((m.group("cur") or ""), (m.group("unit_y") or "").casefold())
            if x_unit == y_unit or not (x_unit[1] or x_unit[0]) or not (y_unit[1] or y_unit[0]):
                continue  # the same unit in brackets is another quantity ("3 tins of 2.5 L (7.5 L)")
            scaled = y.value * value / x.value
            decimals = y.decimals
            while decimals < 2 and abs(round(scaled, decimals) - scaled) > 0.02 * abs(scaled):
                decimals += 1  # "(6 km)" under 5800 m is "(5.8 km)", not "(6 km)"
            self._change(y, round(scaled, decimals), self.source[start])
            self.numbers[y.start] = replace(y, decimals=decimals)

    def _currency(self, start: int) -> str:
        before = self.text[max(0, start - 1) : start]
        return before if before in "£$€¥₹" and before else ""

    def _divide(self, share: Amount) -> None:
        """A percentage written beside the part and the whole it is the ratio of ("£340k spent of £500k (68%)")
        moves with them: the one pair of amounts of one kind in its sentence whose ratio it is, as written (bare
        numbers only when written "x of y" or "x/y": "3 days ... 15 October" is no 20%), written after them (in
        "a 12% deposit on $25,000 is $3,000" the amount is the result), and of two digits at least (a "5%" agrees
        with any ratio from 4.5 to 5.5%)."""
        if share.number.start in self.given:
            return
        start, stop = _sentence(self.text, share.number)
        near = [a for a in self.amounts if a.kind[1] != "%" and start <= a.number.start < stop]
        pairs = [
            (x.number, y.number) for x in near for y in near
            if x.number.value < y.number.value and x.kind == y.kind
            and agrees(100 * x.number.value / y.number.value, share.number)
            and (x.kind != ("", "") or _PART_OF.fullmatch(self.text, x.number.end, y.number.start) is not None)
            and max(x.number.end, y.number.end) <= share.number.start
            and (share.number.value >= 10 or share.number.decimals > 0)
        ]  # fmt: skip
        if len(pairs) != 1:
            return
        x, y = pairs[0]
        moved = [n for n in (x, y) if n.start in self.values]
        if moved:
            part, whole = (self.values.get(n.start, n.value) for n in (x, y))
            if whole > 0:
                self._rederive(share.number, 100 * part / whole, self.source[moved[0].start])
