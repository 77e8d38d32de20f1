"""Written equations: parsed, checked against their own numbers, evaluated and solved (derived values).

A correction changes a value; an earlier turn may have computed something from it: "6 hours × £95 = £570",
"12% of $3,400 = $408", "(72 + 85 + 90 + 64 + 78) / 5 = 389 / 5 = 77.8". :func:`equations` finds such written
chains; :func:`pieces` keeps those whose numbers agree with them as written (so that only real arithmetic is
touched: "Room 4 = 2nd floor" is no equation), splitting a running calculation ("15 × £98.20 = £1,473.00 +
£4.95 = £1,477.95") into its steps; :func:`evaluate` and :func:`solve` compute a side again with new operands,
and :func:`format_like` writes a result in the format of the number it replaces. :mod:`keproxy.corrections.
derived` uses them to rewrite the results that a correction makes stale. A side is computed from its parsed
tree (numbers, ``+ - * /``, parentheses), never with ``eval``.
"""

from __future__ import annotations

import ast
import functools
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from keproxy.corrections.grammar import COUNT_WORDS

__all__ = [
    "NUM", "Equation", "Number", "agrees", "equations", "evaluate", "exactly", "format_like", "numbers_of", "parse_number",
    "pieces", "solve", "termwise", "word_numbers",
]  # fmt: skip

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_TOKEN = re.compile(
    rf"(?P<num>{NUM})(?P<pct>%)?"
    r"|(?P<op>[+×*/÷−-]|(?<=\s)x(?=\s))"
    r"|(?P<eq>=|≈)"
    r"|(?P<lp>\()|(?P<rp>\))"
    r"|(?P<of>(?<=%)\s+of\b)"
    r"|(?P<cur>[£$€¥₹]|\b[A-Z]{3}(?= ?\d))"
    r"|(?P<unit>(?<=[\d%])[^\W\d_]{1,12}(?=[\s)=,.;:]|$)|(?<=\d )[^\W\d_]{1,12}³?²?(?=\s*(?:[+×*/÷−=≈)-]|x\s)))"
    r"|(?P<space>[ \t]+)"
)
_KINDS = ("num", "op", "eq", "lp", "rp", "of", "cur", "unit", "space")
_OPS = {"+": "+", "-": "-", "−": "-", "×": "*", "x": "*", "*": "*", "/": "/", "÷": "/"}


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


def parse_number(m: re.Match[str], percent: bool) -> Number:
    """The :class:`Number` of ``m``'s group "num" (a match of :data:`_TOKEN` or :data:`_AMOUNT`)."""
    text = m.group("num")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return Number(m.start("num"), m.end("num"), float(text.replace(",", "")), percent, decimals, "," in text,
                  decimals > 0 and text.endswith("0"))  # fmt: skip


_ASIDE = re.compile(r"\([^()]*[^\W\d_][^()]*\)")


def equations(text: str) -> list[Equation]:
    """The written equation chains of ``text`` (at least two sides, every side a well-formed expression),
    in order. A parenthetical aside with words in it is read as a space ("2 children (9 and 13) × €7.00 =
    €14.00"); offsets stay those of ``text``. Memoised by text (a chat re-sends its history on every request,
    and one correction reads each edited turn several times)."""
    return list(_equations(text))


@functools.lru_cache(maxsize=1024)
def _equations(text: str) -> tuple[Equation, ...]:
    text = _ASIDE.sub(lambda m: " " * len(m.group()), text)
    out: list[Equation] = []
    sides: list[tuple[Number | str, ...]] = []
    side: list[Number | str] = []
    at = 0

    def close() -> None:
        nonlocal sides, side
        if side:
            sides.append(tuple(side))
        if len(sides) >= 2 and all(evaluate(s, {}) is not None for s in sides):
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
            side.append(parse_number(m, bool(m.group("pct"))))
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
    return tuple(out)


def evaluate(side: Sequence[Number | str], values: dict[int, float]) -> float | None:
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
    try:
        tree = ast.parse(" ".join(parts), mode="eval")
        return _value(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _value(node: ast.expr) -> float | None:
    """The value of a parsed side: numbers, ``+ - * /`` and unary minus only (no ``eval``: the text is the
    user's); None for anything else ("3.0 (4.0)" is a call, not arithmetic)."""
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        return None if left is None or right is None else float(_BINARY[type(node.op)](left, right))
    return None


def numbers_of(side: Sequence[Number | str]) -> list[Number]:
    return [item for item in side if isinstance(item, Number)]


def agrees(value: float, written: Number) -> bool:
    """Whether ``value`` rounds to the number as written (to its decimals)."""
    return abs(value - written.value) <= 0.5 * 10 ** (-written.decimals) + 1e-9


def format_like(value: float, like: Number) -> str | None:
    """``value`` written like ``like`` (its decimals; thousands separators when it has them); None for a
    negative value where a positive one was written."""
    if value < 0 <= like.value:
        return None
    written = f"{value:,.{like.decimals}f}" if like.grouped else f"{value:.{like.decimals}f}"
    if like.decimals and like.decimals != 2 and not like.trailing_zero:
        written = written.rstrip("0").rstrip(".")  # "2.5" -> "2", not "2.0"; money keeps its cents
    return written


_APPROXIMATE = re.compile(
    r"(?:about|around|roughly|approx\.?|approximately|nearly|almost|circa|~|≈)\s*(?:[£$€¥₹]\s*)?$",
    re.IGNORECASE,
)


def exactly(number: Number, value: float, text: str, exact: bool = True) -> Number:
    """``number`` with the decimals that write ``value`` exactly when it was a whole number written ``exact`` (as
    computed, not rounded) and ``value`` is not one but has one or two decimals ("15% of 240 is 36" -> "43.2" under
    18%, not "43"); as it is otherwise, or when the text presents it as an approximation ("about 36")."""
    if (
        not exact
        or number.decimals
        or value == round(value)
        or _APPROXIMATE.search(text, max(0, number.start - 12), number.start)
    ):
        return number
    decimals = next((d for d in (1, 2) if abs(round(value, d) - value) < 1e-9), None)
    return replace(number, decimals=decimals) if decimals else number


def _consistent(equation: Equation) -> bool:
    """Whether every side agrees with the first one, as written (a result rounded to its decimals)."""
    first = evaluate(equation.sides[0], {})
    if first is None:
        return False
    for side in equation.sides[1:]:
        value = evaluate(side, {})
        if value is None:
            return False
        numbers = numbers_of(side)
        if len(side) == 1 and isinstance(side[0], Number):
            if not agrees(100 * first if numbers[0].percent else first, numbers[0]):
                return False  # "400 ÷ 500 = 80%": a ratio written as a percentage
        elif abs(value - first) > 0.5 * 10 ** (-max(n.decimals for n in numbers)) * len(numbers) + 1e-9:
            return False
    return True


def pieces(equation: Equation) -> list[Equation]:
    """The consistent parts of a written chain: the chain itself, or, for a running calculation that goes on
    from a result ("15 × £98.20 = £1,473.00 + £4.95 = £1,477.95"), one equation per step, the result of one
    being the first operand of the next (the same written number)."""
    if _consistent(equation):
        return [equation]
    out, current = [], [equation.sides[0]]
    for side in equation.sides[1:]:
        head = side[0]
        if _consistent(Equation((*current, side))):
            current.append(side)
        elif len(side) > 1 and isinstance(head, Number) and _consistent(Equation((*current, (head,)))):
            out.append(Equation((*current, (head,))))
            current = [side]
        else:
            return [q for q in out if len(q.sides) > 1]
    if len(current) > 1 and _consistent(Equation(tuple(current))):
        out.append(Equation(tuple(current)))
    return out


def _terms(side: Sequence[Number | str]) -> list[tuple[str, list[Number | str]]]:
    """The terms of ``side`` summed at the top level (outside brackets), each with its sign ("+" or "-")."""
    out: list[tuple[str, list[Number | str]]] = [("+", [])]
    depth = 0
    for item in side:
        if isinstance(item, str) and item in "+-" and depth == 0 and out[-1][1]:
            out.append((item, []))
            continue
        if item == "(":
            depth += 1
        elif item == ")":
            depth -= 1
        out[-1][1].append(item)
    return out


def termwise(
    first: Sequence[Number | str], side: Sequence[Number | str], values: dict[int, float]
) -> list[tuple[Number, float]] | None:
    """For a later ``side`` that writes each term of the ``first`` side as one number, in order and with the same
    signs ("0.6 × 77.8 + 0.4 × 88 = 46.68 + 35.2"), each of those numbers with its term's value under ``values``;
    None when the sides are not written so."""
    a, b = _terms(first), _terms(side)
    if len(a) < 2 or len(a) != len(b):
        return None
    out = []
    for (sign_a, term_a), (sign_b, term_b) in zip(a, b, strict=True):
        if sign_a != sign_b or len(term_b) != 1 or not isinstance(term_b[0], Number):
            return None
        value = evaluate(term_a, values)
        if value is None or not agrees(evaluate(term_a, {}) or 0.0, term_b[0]):
            return None
        out.append((term_b[0], value))
    return out


def solve(
    side: Sequence[Number | str], values: dict[int, float], target: float
) -> tuple[Number, float] | None:
    """The leftmost unchanged number of ``side`` and the value that makes ``side`` equal ``target`` (the side
    is linear in one number: two evaluations give the slope); None when no number written like it does."""
    for number in numbers_of(side):
        if number.start in values:
            continue
        low = evaluate(side, {**values, number.start: number.value})
        high = evaluate(side, {**values, number.start: number.value + 1.0})
        if low is None or high is None or abs(high - low) < 1e-12:
            continue
        value = number.value + (target - low) / (high - low)
        written = format_like(value, number)
        if written is None:
            continue
        check = evaluate(side, {**values, number.start: float(written.replace(",", ""))})
        if check is not None and abs(check - target) <= 0.5 * 10 ** (-number.decimals) * 2 + 1e-9:
            return number, float(written.replace(",", ""))
    return None


_SHARES = {w: v for w, v in COUNT_WORDS.items() if v > 1}
_MULTIPLIERS = {**_SHARES, "twice": 2, "double": 2, "triple": 3}
_WORD_NUMBER = re.compile(rf"(?<![\w-])(?:{'|'.join(_MULTIPLIERS)})(?![\w-])", re.IGNORECASE)


def word_numbers(text: str) -> list[tuple[Number, bool]]:
    """The counts of ``text`` written as words ("three ways", "twice"), each with whether it is a multiplier
    ("twice", "double") rather than a count ("three")."""
    return [
        (Number(m.start(), m.end(), float(_MULTIPLIERS[m.group().casefold()]), False, 0, False),
         m.group().casefold() not in _SHARES)
        for m in _WORD_NUMBER.finditer(text)
    ]  # fmt: skip
