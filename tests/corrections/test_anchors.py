"""Stale values found by the words that name their fact (keproxy.corrections.anchors)."""

from __future__ import annotations

import pytest

from keproxy.corrections.anchors import (
    anchored_edits,
    anchors,
    named_over_tagged,
    old_beside,
    split_joined,
    unextracted,
    value_of,
    within_named_clauses,
)
from keproxy.corrections.base import SpanEdit
from keproxy.corrections.spans import fold
from keproxy.corrections.spelling import near_spelling

TEXTS = [
    "Schedule: standup 9:30, design review 11:00, lunch 12:30, 1:1 with Ana 15:00.",
    "Here's your day:\n- 9:30 Standup\n- 11:00 Design review\n- 12:30 Lunch\n- 15:00 1:1 with Ana",
    "Design review moved to 14:00 and the 1:1 is at 16:00.",
]
PAIRS = [(None, "14:00"), (None, "16:00")]


def test_the_anchors_are_the_content_words_of_the_new_values_clause() -> None:
    assert anchors(TEXTS[2], "16:00") == {"1:1"}
    assert anchors(TEXTS[2], "14:00") == {"design", "review"}


def test_a_correction_with_nothing_located_finds_its_value_by_its_anchor() -> None:
    located = [SpanEdit(0, 38, 43, "11:00", "14:00", 0), SpanEdit(1, 35, 40, "11:00", "14:00", 0)]
    out = anchored_edits(TEXTS, [0, 1], 2, PAIRS, located)
    assert [(e.turn_index, e.before, e.after, e.correction) for e in out] == [
        (0, "15:00", "16:00", 1),
        (1, "15:00", "16:00", 1),
    ]


def test_a_bare_hour_after_by_or_until_is_a_time_the_new_time_replaces() -> None:
    texts = ["Bedtime 8pm. We'll be back by 11.", "Noted.", "and we'll be back by 11:30"]
    out = anchored_edits(texts, [0, 1], 2, [(None, "11:30")], [])
    assert [(e.turn_index, e.before, e.after) for e in out] == [(0, "11", "11:30")]
    texts = ["We'll be back by 11 people short.", "Noted.", "and we'll be back by 11:30"]
    assert anchored_edits(texts, [0, 1], 2, [(None, "11:30")], []) == []  # a count, not an hour


def test_a_correction_with_a_located_span_is_left_to_it() -> None:
    located = [SpanEdit(0, 38, 43, "11:00", "14:00", 0), SpanEdit(0, 71, 76, "15:00", "16:00", 1)]
    assert anchored_edits(TEXTS, [0, 1], 2, PAIRS, located) == []


def test_an_anchor_naming_facts_of_different_values_changes_nothing() -> None:
    texts = [
        "Lasagne: bake for 30 minutes at 190C.",
        "Wings: bake on a rack for 50 minutes.",
        "bake is 40 minutes, you put 30.",
    ]
    assert anchored_edits(texts, [0, 1], 2, [(None, "40 minutes")], []) == []


def test_a_clause_with_two_values_of_the_kind_changes_nothing() -> None:
    texts = ["The 1:1 runs 15:00 to 15:30.", "the 1:1 is at 16:00"]
    assert anchored_edits(texts, [0], 1, [(None, "16:00")], []) == []


def test_a_measured_value_keeps_the_texts_unit_word() -> None:
    texts = ["Lasagne: bake for 30 minutes at 190C.", "the bake is 40 min"]
    out = anchored_edits(texts, [0], 1, [(None, "40 min")], [])
    assert [(e.before, e.after) for e in out] == [("30", "40")]


def test_in_a_sentence_of_two_facts_the_named_clause_changes() -> None:
    texts = ["Pick-up is at 8:00 from gate 3, drop-off at 17:00 at gate 3.", "Pick-up is from gate 5."]
    pickup, dropoff = texts[0].index("3,"), texts[0].rindex("3")
    edits = [SpanEdit(0, pickup, pickup + 1, "3", "5", 0), SpanEdit(0, dropoff, dropoff + 1, "3", "5", 0)]
    assert within_named_clauses(texts, 1, [(None, "gate 5")], edits) == edits[:1]
    # another sentence without the anchor keeps its edit: the sentence does not state the two facts
    texts = ["Pick-up is from gate 3. Meet the driver at gate 3.", "Pick-up is from gate 5."]
    a, b = texts[0].index("3"), texts[0].rindex("3")
    edits = [SpanEdit(0, a, a + 1, "3", "5", 0), SpanEdit(0, b, b + 1, "3", "5", 0)]
    assert within_named_clauses(texts, 1, [(None, "gate 5")], edits) == edits


def test_a_weekday_is_found_by_its_anchor_and_written_as_the_text_writes_it() -> None:
    texts = [
        "Book club is on Thursday at 7, and Thursday is also my pottery class at 5.",
        "Calendar:\nThu 5:00pm - pottery\nThu 7:00pm - book club at Rosa's",
        "no, book club is friday. pottery is still thursday",
    ]
    out = anchored_edits(texts, [0, 1], 2, [(None, "friday")], [])
    assert [(e.turn_index, e.before, e.after) for e in out] == [(0, "Thursday", "Friday"), (1, "Thu", "Fri")]
    assert "pottery" not in anchors(texts[2], "friday")


def test_a_code_is_found_by_the_words_of_its_sentence_and_a_value_already_new_is_left() -> None:
    texts = [
        "Please ask the caretaker to fix the radiator in unit 4C before the weekend.",
        "Hi Sam, the radiator in Unit 4E is cold again. Could someone look at it before Saturday?",
        "wrong unit in that, it's 4C",
    ]
    assert anchors(texts[2], "4C") == {"unit"}
    out = anchored_edits(texts, [0, 1], 2, [(None, "4C")], [])
    assert [(e.turn_index, e.before, e.after) for e in out] == [(1, "4E", "4C")]


BUDGET = [
    "Costs: flights £1,240 total, villa £2,100, car hire £380.",
    "- Flights: £1,240\n- Villa: £2,100\n- Car hire: £380",
    "the villa's £2,450, I forgot the cleaning fee",
]


def test_a_tagged_value_of_another_fact_gives_way_to_the_value_the_anchor_names() -> None:
    tagged = [SpanEdit(0, 15, 21, "£1,240", "£2,450", 0), SpanEdit(1, 11, 17, "£1,240", "£2,450", 0)]
    assert named_over_tagged(BUDGET, [0, 1], 2, [(None, "£2,450")], tagged) == []
    out = anchored_edits(BUDGET, [0, 1], 2, [(None, "£2,450")], [])
    assert [(e.turn_index, e.before, e.after) for e in out] == [
        (0, "£2,100", "£2,450"),
        (1, "£2,100", "£2,450"),
    ]


def test_a_tagged_value_the_anchor_names_stays() -> None:
    tagged = [SpanEdit(0, 35, 41, "£2,100", "£2,450", 0)]
    assert named_over_tagged(BUDGET, [0, 1], 2, [(None, "£2,450")], tagged) == tagged
    # a named old value is the user's word: the anchors do not overrule it
    flights = [SpanEdit(0, 15, 21, "£1,240", "£2,450", 0)]
    assert named_over_tagged(BUDGET, [0, 1], 2, [("£1,240", "£2,450")], flights) == flights


def test_a_plain_number_is_found_by_its_anchor_but_never_as_the_only_number() -> None:
    texts = ["| Quarter | Signups |\n| Q1 | 1,240 |\n| Q2 | 1,310 |", "Q2 was 1,350"]
    out = anchored_edits(texts, [0], 1, [(None, "1,350")], [])
    assert [(e.before, e.after) for e in out] == [("1,310", "1,350")]
    texts = ["An adult has 212 bones, babies around 270.", "206."]
    assert anchored_edits(texts, [0], 1, [(None, "206")], []) == []


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        ("East €1.4M", ("€1.4M", {"east"})),
        ("Flat 3D", ("3D", {"flat"})),
        ("16:00", ("16:00", set())),
        ("the Sun by Kazuo Ishiguro", ("the Sun by Kazuo Ishiguro", set())),  # a clause, and "Sun" is no day
        (
            "The doors open at 7 pm and the show starts at 8:30 pm",
            ("The doors open at 7 pm and the show starts at 8:30 pm", set()),
        ),
    ],
)
def test_a_value_and_the_words_naming_its_fact(new: str, expected: tuple[str, set[str]]) -> None:
    assert value_of(new) == expected


def test_two_joined_values_are_two_corrections_a_list_of_values_is_one() -> None:
    assert split_joined([(None, "1,350 and Q3 1,420")]) == [(None, "1,350"), (None, "1,420")]
    assert split_joined([(None, "£4,600 and the crypto one £2,300")]) == [(None, "£4,600"), (None, "£2,300")]
    for whole in [(None, "3 and 5"), (None, "10am and Friday 3pm"), ("£12", "£9 and the tip £2")]:
        assert split_joined([whole]) == [whole]


def test_a_wide_tagged_span_counts_by_the_words_it_changes() -> None:
    texts = [
        "Two speakers: Dr. Haines lands at 14:20, and Dr. Kowal lands at 16:05. Both stay at the Lindenhof.",
        "Kowal is landing 17:05, he told me",
    ]
    wide = texts[0][texts[0].index("14:20") : texts[0].index("16:05") + 5]
    start = texts[0].index(wide)
    edit = SpanEdit(0, start, start + len(wide), wide, wide.replace("14:20", "17:05", 1), 0)
    assert named_over_tagged(texts, [0], 1, [(None, "17:05")], [edit]) == []
    out = anchored_edits(texts, [0], 1, [(None, "17:05")], [])
    assert [(e.before, e.after) for e in out] == [("16:05", "17:05")]


def test_an_edit_writing_one_value_over_two_of_its_kind_goes_and_the_anchor_places_it() -> None:
    texts = ["Sessions: Tuesday 1500m, Thursday 2000m, Saturday 2500m.", "Thursday is 1800m."]
    start = texts[0].index("2000m")
    wide = SpanEdit(0, start, start + len("2000m, Saturday 2500m"), "2000m, Saturday 2500m", "1800m", 0)
    assert named_over_tagged(texts, [0], 1, [(None, "1800m")], [wide]) == []
    out = anchored_edits(texts, [0], 1, [(None, "1800m")], [])
    assert [(e.before, e.after) for e in out] == [("2000", "1800")]


def test_a_tagged_value_in_a_clause_naming_the_anchor_is_not_overruled() -> None:
    texts = [
        "Ferries: Paros to Naxos 15:00 (arrives 15:45), then the bus.",
        "You'll have lunch on Paros and reach Naxos at 15:45.",
        "Paros to Naxos goes at 16:30 now",
    ]
    at = texts[0].index("15:00")
    tagged = [SpanEdit(0, at, at + 5, "15:00", "16:30", 0)]
    assert named_over_tagged(texts, [0, 1], 2, [(None, "16:30")], tagged) == tagged


def test_the_override_reads_the_values_own_clause_only() -> None:
    texts = [
        "Parcel A (2.4 kg, books). Parcel B (6.1 kg, kitchenware) is above 5 kg.",
        "the kitchenware one is lighter than I told you, 5.1 kg",
    ]
    at = texts[0].index("6.1")
    tagged = [SpanEdit(0, at, at + 3, "6.1", "5.1", 0)]
    assert anchors(texts[1], "5.1 kg", widen=False) == set()
    assert named_over_tagged(texts, [0], 1, [(None, "5.1 kg")], tagged) == tagged


def test_the_old_value_written_beside_the_new_one_is_named() -> None:
    history = fold("The AF-550 is 5.5 L and €89; the Brio is €74. The price gap is only €15.")
    turn = (
        "the price I gave you for the bigger one is off, it's €99 on the shelf, the €89 was last week's promo"
    )
    assert old_beside([(None, "€99")], turn, history) == [("€89", "€99")]
    # a value of the kind in another sentence, or one the chat never stated, names nothing
    assert old_beside(
        [(None, "wednesday")], "no, it's wednesday. piano is still tuesday", fold("on Tuesday")
    ) == [(None, "wednesday")]
    assert old_beside([(None, "€99")], "it's €99, not the €95 I said", history) == [(None, "€99")]


def test_a_value_the_user_says_was_written_is_the_old_one() -> None:
    history = fold("Meds: metformin 08:00 + 18:00. Sheet: metformin at 08:00 and 19:00.")
    turn = "the evening metformin is 18:00 as in my list, you wrote 19:00. the rest is fine"
    assert old_beside([(None, "18:00"), (None, "19:00")], turn, history) == [("19:00", "18:00")]
    assert old_beside([(None, "19:00")], turn, history) == [("19:00", "18:00")]
    # without "you wrote" two new values stay two corrections
    plain = "metformin is 18:00 and the insulin 19:00"
    assert old_beside([(None, "18:00"), (None, "19:00")], plain, history) == [
        (None, "18:00"),
        (None, "19:00"),
    ]


RIDE = [
    "Log my ride: 38 km, 1h25, avg HR 141, climbing 420 m.",
    "Logged: 38 km in 1h25, avg HR 141, 420 m of climbing.",
]


@pytest.mark.parametrize(
    ("turn", "expected"),
    [
        ("sorry, it was 41 km and avg HR 139", [(None, "139")]),  # the tagger read only "41 km"
        ("sorry, it was 41 km. is avg HR 139 good for that?", []),  # asked, not corrected
        ("sorry, it was 41 km, avg HR stays 139", []),  # said to stay
        ("sorry, it was 41 km, 1h25 as logged", []),  # already written: a reason, not a change
        ("sorry, it was 41 km and the café stop was 25", []),  # names no clause of the ride
    ],
)
def test_a_value_the_tagger_did_not_extract_is_a_correction_where_its_words_name_one_value(
    turn: str, expected: list[tuple[None, str]]
) -> None:
    texts = [*RIDE, turn]
    extra, edits = unextracted(texts, [0, 1], 2, [(None, "41 km")], [])
    assert extra == expected
    if expected:
        assert [(e.turn_index, e.before, e.after, e.correction) for e in edits] == [
            (0, "141", "139", 1),
            (1, "141", "139", 1),
        ]
    else:
        assert edits == []


def test_a_correction_with_no_extracted_value_reads_the_values_of_its_turn() -> None:
    texts = [
        "Who painted The Night Watch?",
        "Rembrandt finished The Night Watch in 1640; it hangs in the Rijksmuseum in Amsterdam.",
        "He finished the Night Watch in 1642.",
    ]
    extra, edits = unextracted(texts, [0, 1], 2, [], [])
    assert extra == [(None, "1642")]
    assert [(e.turn_index, e.before, e.after, e.correction) for e in edits] == [(1, "1640", "1642", 0)]


def test_a_dash_between_words_ends_the_new_value() -> None:
    pairs = [(None, "Southgate pharmacy - Northgate"), (None, "9 - 5"), ("Elm", "Oak Street – the corner")]
    assert split_joined(pairs) == [(None, "Southgate pharmacy"), (None, "9 - 5"), ("Elm", "Oak Street")]


def test_a_number_word_written_beside_the_new_one_and_stated_before_is_the_old_one() -> None:
    history = fold("Once there was a girl called Ada who was seven, and she wanted a telescope.")
    turn = "Ada should be ten though, my niece is ten and would hate being seven"
    assert old_beside([(None, "ten")], turn, history) == [("seven", "ten")]


def test_a_name_in_code_written_beside_the_new_one_and_stated_before_is_the_old_one() -> None:
    history = fold("import { formatPrice } from './utils'; total.textContent = formatPrice(sum);")
    turn = "formatPrice isn't a thing in utils, the export is formatMoney"
    assert old_beside([(None, "formatMoney")], turn, history) == [("formatPrice", "formatMoney")]
    assert old_beside([(None, "format_money")], "use format_money, like format_date", history) == [
        (None, "format_money")
    ]  # "format_date" was never stated: nothing to take for the old name


def test_a_percentage_is_read_with_the_words_after_it() -> None:
    texts = [
        "Summarise the poll: 1,200 replies, 41% back the new bus lane, 33% want more parking.",
        "Of 1,200 replies, 41% back the new bus lane, and 33% want more parking.",
        "Replies were 1,250, not 1,200. And 44% back the new bus lane.",
    ]
    extra, edits = unextracted(texts, [0, 1], 2, [("1,200", "1,250")], [])
    assert extra == [(None, "44%")]
    assert [(e.turn_index, e.before, e.after) for e in edits] == [(0, "41%", "44%"), (1, "41%", "44%")]


def test_a_day_of_the_month_is_read_and_a_value_held_elsewhere_is_still_a_change() -> None:
    texts = [
        "Remind me: gym fee £40 due on the 3rd, phone £22 due on the 12th.",
        "Reminders set: gym fee £40 on the 3rd, phone £22 on the 12th.",
        "the gym fee moved to the 12th with the new contract",
    ]
    extra, edits = unextracted(texts, [0, 1], 2, [], [])
    assert extra == [(None, "the 12th")]  # the phone's "12th" elsewhere does not make it a restatement
    assert [(e.turn_index, e.before, e.after) for e in edits] == [
        (0, "the 3rd", "the 12th"),
        (1, "the 3rd", "the 12th"),
    ]


@pytest.mark.parametrize(
    ("pairs", "turn", "expected"),
    [
        ([(None, "redis-02")], "typo on my side: the host is redis-02", [("redis-2", "redis-02")]),
        ([("Kowalsky", "y-i")], "It's Kowalski with an i, not Kowalsky.", [("Kowalsky", "Kowalski")]),
        ([(None, "eleven")], "she's eleven", [(None, "eleven")]),  # a lower-case word is no name ("elven")
        ([(None, "Tuesday")], "moved to Tuesday", [(None, "Tuesday")]),  # another day, not a spelling
        ([(None, "Priya")], "it's Priya", [(None, "Priya")]),  # nothing spelt like it
    ],
)
def test_a_typo_fix_takes_the_name_spelt_almost_like_it(
    pairs: list[tuple[str | None, str]], turn: str, expected: list[tuple[str | None, str]]
) -> None:
    history = (
        "Connect to redis-2 on port 6379; Mr Kowalsky signs the form. An elven bow on Thursday, for Priyanka."
    )
    assert near_spelling(pairs, turn, history) == expected
