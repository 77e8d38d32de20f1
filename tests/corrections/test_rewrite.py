"""Locate-and-rewrite pieces without models: stale cores, tagger examples, minimal replacements, exact patches."""

from __future__ import annotations

import asyncio
import random

import pytest

from keproxy.corrections.assign import choose_correction, written_agreement
from keproxy.corrections.base import Correction, SpanEdit
from keproxy.corrections.grammar import (
    capitalised,
    capitalised_like,
    keep_brackets,
    noun_agreeing,
    unshouted,
    with_article,
)
from keproxy.corrections.located import located_edits
from keproxy.corrections.rewrite import aligned_run, differing_words, replacement
from keproxy.corrections.schedule import value_by_value
from keproxy.corrections.tagging import stale_core, stale_examples, turn_examples
from keproxy.editors.base import EditContext
from keproxy.editors.history.patch import PatchEditor

CHAT = {
    "id": "t-1", "domain": "scheduling", "style": "implicit", "is_correction": True,
    "messages": [
        {"role": "user", "content": "Book the review on Tuesday at 3pm in Room 204. I have yoga every Tuesday."},
        {"role": "assistant", "content": "Done: the review is on Tuesday at 3pm in Room 204. Bring your laptop."},
        {"role": "user", "content": "Actually, make that 4pm."},
    ],
    "corrections": [{"old": None, "new": "4pm"}],
    "stale_spans": [{"turn": 0, "text": "Tuesday at 3pm", "replacement": "Tuesday at 4pm"},
                    {"turn": 1, "text": "3pm", "replacement": "4pm"}],
    "keep_spans": [{"turn": 0, "text": "I have yoga every Tuesday"}],
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "new", "core"),
    [("on Tuesday at 3pm", "on Tuesday at 4pm", "3pm"), ("2.4 m", "2.6 m", "2.4"), ("£1,250 a month", "£1,500 a month", "1,250"),
     ("14:05 UTC", "14:35 UTC", "14:05"), ("Porto", "Lisbon", "Porto")],
)  # fmt: skip
def test_stale_core_is_the_differing_words(text: str, new: str, core: str) -> None:
    a, b = stale_core(text, new)
    assert text[a:b] == core


def test_examples_tag_values_and_stale_words() -> None:
    (turn,) = turn_examples([CHAT])
    assert turn.label == "CORRECTION" and [(turn.text[a:b], s) for a, b, s in turn.spans] == [("4pm", "NEW")]
    examples = stale_examples([CHAT], random.Random(0))
    stale = [(e.pair, [e.pair[a:b] for a, b, _ in e.spans]) for e in examples if e.label == "STALE"]
    assert stale == [("Book the review on Tuesday at 3pm in Room 204.", ["3pm"]),
                     ("Done: the review is on Tuesday at 3pm in Room 204.", ["3pm"])]  # fmt: skip
    assert {e.pair for e in examples if e.label == "NOT_STALE"} == {
        "I have yoga every Tuesday.",
        "Bring your laptop.",
    }


@pytest.mark.parametrize(
    ("sentence", "span", "new", "old", "expected"),
    [
        ("The hackathon had 64 participants in 16 teams.", "16", "18 teams", None, "18"),
        ("The review is on Tuesday at 3pm in Room 204.", "3pm", "4", None, "4pm"),
        ("The review is on Tuesday at 3pm in Room 204.", "3pm", "at 4pm", None, "4pm"),
        ("We each put in $250 a month.", "$250", "300", None, "$300"),
        ("The tower was completed in 1887 as an arch.", "1887", "The tower was completed in 1889", None, "1889"),
        ("The tower was completed in 1887 as an arch.", "1887", "The tower was completed in 1889",
         "The tower was completed in 1887", "1889"),
        ("Porto is lovely in May.", "Porto", "lisbon", None, "Lisbon"),
        # a sign or unit the text already writes glued to the span is not written twice
        ("Two hours at £45 = £90.", "45", "£50", None, "50"),
        ("Design work is billed at €65/h.", "65", "€70/h", None, "70"),
        ("Order two 40-count boxes.", "40", "36-count", None, "36"),
        # the text keeps its own unit and what follows it
        ("The shelf is 30 cm deep and white.", "30", "35 cm deep", None, "35"),
        ("Bake for 25-30 minutes until golden.", "25-30", "35-40 min", None, "35-40"),  # a range; min = minutes
        ("It takes about 3 hrs each way.", "3", "4 hours", None, "4"),
        ("name: pg-01\nvcpus: 8\nmemory_gb: 32", "8", "4 vCPU", None, "4"),  # the unit is the span's label
        # a bare old number named by the user: the number is the value, the rest describes it
        ("Two hours at £45 = £90.", "45", "£50 an hour", "45", "50"),
        ("We booked a table for 6 at 8.", "6", "7 people", "6", "7"),
    ],
)  # fmt: skip
def test_replacement_fits_the_new_value_to_the_span(
    sentence: str, span: str, new: str, old: str | None, expected: str
) -> None:
    start = sentence.index(span)
    assert replacement(sentence, start, start + len(span), new, old) == expected


def test_replacement_that_changes_nothing_is_none() -> None:
    assert replacement("We meet at 4pm.", 11, 14, "4pm") is None


def test_a_span_goes_to_the_correction_that_names_it_or_shares_its_kind() -> None:
    pairs: list[tuple[str | None, str]] = [("Porto", "Lisbon"), (None, "14:20")]
    assert choose_correction("13:50", "we land at 13:50", pairs) == 1
    assert choose_correction("Porto", "fly to Porto", pairs) == 0


def test_a_span_goes_to_the_correction_of_its_kind_written_like_it() -> None:
    # two new-only numbers: the span goes to the one written like it where it stands, not to the first
    sentence = "£340k of the £500k budget spent, 70% complete, door code 4812B, 8 vCPU and 32 GB RAM"
    money_share: list[tuple[str | None, str]] = [(None, "£385k"), (None, "75%")]
    assert choose_correction("70", sentence, money_share, sentence.index("70%")) == 1
    assert choose_correction("340k", sentence, money_share, sentence.index("340k")) == 0
    address_code: list[tuple[str | None, str]] = [(None, "21 Rue Oberkampf"), (None, "7730A")]
    assert choose_correction("4812B", sentence, address_code) == 1
    machine: list[tuple[str | None, str]] = [(None, "4 vCPU"), (None, "16 GB")]
    assert choose_correction("32", sentence, machine) == 1
    assert choose_correction("8", sentence, machine) == 0
    # nothing tells them apart: the first, as before
    assert choose_correction("3", "on 3 May", [(None, "13 May"), (None, "11 May")]) == 0


def test_written_agreement_counts_form_and_unit() -> None:
    text = "Shipping box 60 × 40 × 35 cm, 8.1 kg, address 12 Rue Oberkampf."
    at = text.index("35")
    assert written_agreement(text, at, at + 2, "38 cm") == 2  # "#" and the unit "cm"
    assert written_agreement(text, at, at + 2, "9 kg") == 1  # the form only
    assert written_agreement(text, at, at + 2, "38.5") == 0
    at = text.index("8.1")
    assert written_agreement(text, at, at + 3, "7.9 kg") == 2
    at = text.index("12 Rue")
    assert written_agreement(text, at, at + len("12 Rue Oberkampf"), "21 Rue Oberkampf") == 1
    assert written_agreement(text, at, at + len("12 Rue Oberkampf"), "7730A") == 0


def test_patch_changes_exactly_the_located_spans() -> None:
    messages = [dict(m) for m in CHAT["messages"]]
    first, second = messages[0]["content"], messages[1]["content"]
    at0, at1 = first.index("3pm"), second.index("3pm")
    spans = (SpanEdit(0, at0, at0 + 3, "3pm", "4pm"), SpanEdit(1, at1, at1 + 3, "3pm", "4pm"),
             SpanEdit(1, 0, 4, "Gone", "x"))  # the last no longer matches its text: skipped  # fmt: skip
    correction = Correction(2, None, "4pm", "learned", 0.9, None, spans)
    result = asyncio.run(PatchEditor().edit(messages, [correction], EditContext()))
    assert result.messages[0]["content"] == first.replace("3pm", "4pm")
    assert "I have yoga every Tuesday." in result.messages[0]["content"]
    assert (
        result.messages[1]["content"]
        == "Done: the review is on Tuesday at 4pm in Room 204. Bring your laptop."
    )
    assert [(e.turn_index, e.before, e.after) for e in result.edits] == [(0, "3pm", "4pm"), (1, "3pm", "4pm")]
    assert messages[0]["content"] == first  # the input is not mutated


def test_unquoted_keeps_quotes_that_belong_to_the_text() -> None:
    from keproxy.corrections.rewrite import unquoted

    assert unquoted('"the room is 310"') == "the room is 310"
    said = '"You look like someone I know," she said. "But who?"'
    assert unquoted(said) == said


@pytest.mark.parametrize(
    ("text", "span", "new", "expected"),
    [
        ("Dinner is on Saturday 8 June at 7pm.", "Saturday", "Sunday 9 June", "Dinner is on Sunday 9 June at 7pm."),
        ("Meet at the Lamb & Flag, Bridge Street.", "Lamb", "Crown & Anchor",
         "Meet at the Crown & Anchor, Bridge Street."),
        ("Rollout: Monday, 3 March.", "3", "Monday 10 March", "Rollout: Monday, 10 March."),
    ],
)  # fmt: skip
def test_a_span_inside_a_run_written_like_the_new_value_changes_the_differing_words(
    text: str, span: str, new: str, expected: str
) -> None:
    start = text.index(span)
    run = aligned_run(text, start, start + len(span), new)
    assert run is not None
    a, b, after = run
    assert text[:a] + after + text[b:] == expected


@pytest.mark.parametrize(
    ("text", "span", "new"),
    [
        ("The meeting is at 3pm on Tuesday.", "3pm", "4pm Tuesday"),  # nothing shared in place
        ("Limit: 10 requests allowed.", "10", "120 requests per"),  # a plain word outside the span differs
        ("I own the f/4L. Thinking of STM", "f/4L", "f/4-7.1 STM"),  # crosses a sentence end
        ("Dinner on Saturday\n8 June", "Saturday", "Sunday 9 June"),  # another line
    ],
)
def test_no_run_where_the_words_are_not_written_like_the_new_value(text: str, span: str, new: str) -> None:
    start = text.index(span)
    assert aligned_run(text, start, start + len(span), new) is None


@pytest.mark.parametrize(
    ("sentence", "span", "new", "expected"),
    [
        ("Your 5-night stay starts on the 3rd.", "5-night", "4 nights", "4-night"),
        ("a 3rd-floor walk-up", "3rd-floor", "4th floor", "4th-floor"),
        ("the 60-litre tank", "60-litre", "120 litres", "120-litre"),
    ],
)
def test_a_number_joined_to_its_unit_keeps_its_written_form(
    sentence: str, span: str, new: str, expected: str
) -> None:
    start = sentence.index(span)
    assert replacement(sentence, start, start + len(span), new) == expected


def test_a_joined_word_of_another_unit_takes_the_new_value_as_it_is() -> None:
    sentence = "a 5-night stay"
    assert replacement(sentence, 2, 9, "4 weeks") == "4 weeks"


def _fit(text: str, new: str) -> str | None:
    fitted = differing_words(text, 0, len(text), new)
    if fitted is None:
        return None
    (a, b, after), _ = fitted
    return text[:a] + after + text[b:]


def test_a_restated_clause_keeps_the_leading_and_trailing_words_it_does_not_have() -> None:
    text = "Tracking says it was handed to DPD on 5 June and it's now 11 June."
    assert _fit(text, "It was handed to Evri on 5 June.") == (
        "Tracking says it was handed to Evri on 5 June and it's now 11 June."
    )
    fitted = differing_words(text, 0, len(text), "It was handed to Evri on 5 June.")
    assert fitted is not None and fitted[1] == [("DPD", "Evri")]


def test_a_restatement_of_the_whole_clause_replaces_it_whole() -> None:
    # inner words the restatement drops ("in 1981", "not") go with the rest: the clause is the restatement
    text = "The station was automated in 1981, and no keeper has lived there since."
    assert (
        differing_words(
            text, 0, len(text), "The station was never automated, and a keeper still lives there today."
        )
        is None
    )
    text = "Nora did not ask the neighbor, because Mrs. Patel was on holiday in Spain. She left."
    assert _fit(text[:74], "Nora did ask the neighbor, but Mrs. Patel was on holiday in Spain.") is None


def test_an_unrelated_clause_is_no_restatement() -> None:
    text = "The weather was awful all week."
    assert differing_words(text, 0, len(text), "It was handed to Evri on 5 June.") is None
    # a restatement that rewords much of the clause replaces it whole
    text = "Anyone can borrow three books and borrowing is free; Tomas pays for fuel with money from a car wash job."
    new = "Anyone can borrow three books for a small fee, which helps Tomas pay for fuel."
    assert differing_words(text, 0, len(text), new) is None


def test_a_named_old_value_keeps_its_words_a_one_word_new_value_does_not_replace() -> None:
    sentence = "You're in flat 3B on the second floor."
    start = sentence.index("flat 3B")
    assert replacement(sentence, start, start + 7, "3D", "flat 3B") == "flat 3D"
    # no single word of the new value's kind: the new value replaces the named words
    assert replacement("in Room 204 at 3pm", 3, 11, "library", "Room 204") == "library"


@pytest.mark.parametrize(
    ("sentence", "span", "new", "after"),
    [
        (
            "With a 4- and 6-year-old, pick morning flights.",
            "4- and 6-year-old",
            "3 and 5",
            "3- and 5-year-old",
        ),
        ("Ages 4, 6 and 9 this year.", "4, 6 and 9", "3, 5 and 8", "3, 5 and 8"),
    ],
)
def test_several_numbers_change_in_order_and_the_words_around_them_stay(
    sentence: str, span: str, new: str, after: str
) -> None:
    start = sentence.index(span)
    assert replacement(sentence, start, start + len(span), new) == after


def test_a_new_values_word_the_sentence_has_in_another_form_is_not_written_twice() -> None:
    sentence = "My daughter Zoe turns 7 on Friday."
    start = sentence.index("7")
    assert replacement(sentence, start, start + 1, "turning 8") == "8"  # not "turns turning 8"


@pytest.mark.parametrize(("text", "kind"), [("three cats", "number"), ("16 years", "number"), ("St", "name"),
                                            ("the one I booked", "word"), ("cats", "word")])  # fmt: skip
def test_number_words_are_numbers_one_is_not(text: str, kind: str) -> None:
    from keproxy.corrections.rewrite import shape

    assert shape(text) == kind


@pytest.mark.parametrize(("new", "after"), [("€9", "€9.00"), ("9", "€9.00"), ("€9.50", "€9.50")])
def test_a_whole_amount_keeps_the_zero_cents_the_span_is_written_with(new: str, after: str) -> None:
    sentence = "The ticket costs €7.00 per person."
    start = sentence.index("€7.00")
    assert replacement(sentence, start, start + 5, new) == after


def test_an_aligned_run_keeps_the_rest_of_a_word_a_number_is_written_into() -> None:
    text = "With a 4- and 6-year-old, pick morning flights."
    assert aligned_run(text, 7, 24, "3 and 5") == (7, 24, "3- and 5-year-old")


def test_an_unmatched_bracket_of_the_span_stays() -> None:
    assert keep_brackets("(68%", "75%") == "(75%"
    assert keep_brackets("68%)", "75%") == "75%)"
    assert keep_brackets("(68%)", "75%") == "75%"  # a whole bracketed value is the value
    assert keep_brackets("68%", "75%") == "75%"


@pytest.mark.parametrize(
    ("sentence", "span", "new", "expected"),
    [
        ("For an 8-year-old fan of dinosaurs.", "8-year-old", "turning 9", "9-year-old"),
        ("The hotel is $300 a night.", "$300", "about $350", "$350"),
        ("Meet in Room 204 at noon.", "204", "Room 310", "310"),  # the text already says "Room"
    ],
)
def test_words_the_user_put_before_a_number_are_not_the_value(
    sentence: str, span: str, new: str, expected: str
) -> None:
    at = sentence.index(span)
    assert replacement(sentence, at, at + len(span), new) == expected


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("For an ", "9-year-old", "For a 9-year-old"),
        ("For a ", "8-year-old", "For an 8-year-old"),
        ("For a ", "11-year-old", "For an 11-year-old"),
        ("Book a ", "1,800 m climb", "Book a 1,800 m climb"),  # "one thousand eight hundred": "a" stays
        ("It was an ", "hour", "It was an hour"),
        ("Take a ", "apple", "Take an apple"),
        ("Call an ", "NHS line", "Call an NHS line"),  # read letter by letter: left as written
    ],
)
def test_the_article_before_an_edit_agrees_with_its_new_words(before: str, after: str, expected: str) -> None:
    start, written = with_article(before, len(before), after)
    assert before[:start] + written == expected


@pytest.mark.parametrize(
    ("span", "after", "expected"),
    [
        ("cat", "DOG", "dog"),  # "Biscuit is a DOG not a cat": the capitals were emphasis
        ("on monday", "on TUESDAY", "on tuesday"),
        ("Walgreens", "CVS", "CVS"),  # a name written with capitals: an acronym may replace it
        ("postgres", "MySQL", "MySQL"),  # mixed case is a spelling
        ("dsn", "SENTRY_DSN_BACKEND", "SENTRY_DSN_BACKEND"),  # joined words are code
        ("room b2", "room B4", "room B4"),  # one capital is no shouting
    ],
)
def test_a_word_in_capitals_is_written_in_the_lower_case_of_its_span(
    span: str, after: str, expected: str
) -> None:
    assert unshouted(span, after) == expected


@pytest.mark.parametrize(
    ("span", "after", "said", "expected"),
    [
        ("Coach 67", "coach 90", "coach 67? no, coach 90", "Coach 90"),  # the span's own word, its spelling
        ("Sunday", "saturday", "I topped it up on saturday", "Saturday"),  # weekday names have a capital
        (
            "sunday",
            "saturday",
            "i topped it up on saturday",
            "saturday",
        ),  # the text writes them in lower case
        ("Japan", "south korea", "i said japan, meant south korea", "South Korea"),  # a name for a name
        ("Japan", "south korea", "I said Japan, meant south korea", "south korea"),  # lower case was a choice
        ("Paris", "home", "nah it's at home", "home"),  # the chat writes "home" in lower case
        ("Heathrow", "the airport hotel", "no, the airport hotel", "the airport hotel"),  # not a name
        ("temperature=0.7", "temperature=0.2", "temp 0.2", "temperature=0.2"),  # code keeps its case
        ("£9,500", "£12k", "budget was £12k.", "£12k"),
        ("the printer uses 80 mm **Printer** paper", "the printer uses 58 mm", "x", "the printer uses 58 mm"),
    ],
)
def test_a_value_said_in_lower_case_takes_the_capitals_the_text_spells_it_with(
    span: str, after: str, said: str, expected: str
) -> None:
    history = ["We'll be at home by six; the hotel is near Paris.", "Fine."]
    assert capitalised_like(span, after, sentence_start=False, said=said, history=history) == expected


def test_a_lower_case_value_that_starts_a_sentence_gets_its_capital_only_where_the_span_had_one() -> None:
    texts = ["Black backpack, blue coat.\n    colour = black", "ugh the backpack is navy, not black"]
    edits = [SpanEdit(0, 0, 5, "Black", "navy", 0), SpanEdit(0, 40, 45, "black", "navy", 0)]
    assert [e.after for e in capitalised(texts, 1, edits)] == ["Navy", "navy"]


def test_a_bare_old_number_names_the_value_written_with_its_cents() -> None:
    text = "| Website hosting, monthly | 6 | €59.00 | €354.00 |"
    at = text.index("59.00")
    assert replacement(text, at, at + 5, "49 a month", "59") == "49.00"  # the table's cell, not "49 a month"


def test_a_named_old_word_takes_the_whole_new_value_unless_its_other_words_are_the_texts() -> None:
    sentence = "Since you're allergic to peanuts, try apple slices."
    at = sentence.index("peanuts")
    assert replacement(sentence, at, at + 7, "tree nuts", "peanuts") == "tree nuts"  # was "nuts"
    sentence = "Your seat is number 27 on the left."
    at = sentence.index("27")
    assert replacement(sentence, at, at + 2, "number 72", "27") == "72"  # "number" is the text's own


def test_the_texts_own_mark_and_words_after_the_span_are_not_written_twice() -> None:
    sentence = "Draft a reply to Mr. Patel confirming our call."
    at = sentence.index("Mr")
    assert replacement(sentence, at, at + 2, "Ms. Patel", "Mr") == "Ms"  # was "Ms. Patel": "Ms. Patel. Patel"


def test_an_operand_of_written_arithmetic_stays_a_bare_number() -> None:
    text = "Daily steps: 4200 + 5100 + 3900 = 13200 steps over three days."
    at = text.index("5100")
    # the new value's glued unit belongs to the result, not to the operand
    assert replacement(text, at, at + 4, "4800 steps") == "4800"
    assert replacement(text, at, at + 4, "4800steps") == "4800"
    # an operand written with zero cents keeps them
    text = "3 tickets × €12.00 = €36.00"
    at = text.index("12.00")
    assert replacement(text, at, at + 5, "€15") == "15.00"
    # a number that is no operand keeps the unit the user wrote
    text = "Monday 1500m, Thursday 2000m."
    at = text.index("2000m")
    assert replacement(text, at, at + 5, "1800m") == "1800m"


def test_the_counted_noun_follows_a_count_that_crosses_one() -> None:
    def agreed(text: str, before: str, after: str) -> str:
        at = text.index(before)
        end, written = noun_agreeing(text, at + len(before), before, after)
        return text[:at] + written + text[end:]

    assert (
        agreed("The crate holds 3 ripe melons and a lime.", "3", "1")
        == "The crate holds 1 ripe melon and a lime."
    )
    assert agreed("Book 1 room for the night.", "1", "two") == "Book two rooms for the night."
    assert agreed("We need 2 boxes of nails.", "2", "1") == "We need 1 box of nails."
    # a count that does not cross one, an irregular noun, a unit, or a word that may be no noun: left as written
    assert agreed("We need 2 boxes of nails.", "2", "5") == "We need 5 boxes of nails."
    assert agreed("Invite 2 people over.", "2", "1") == "Invite 1 people over."
    assert agreed("Add 1 kg of flour.", "1", "2") == "Add 2 kg of flour."
    assert agreed("Check again 1 hour later.", "1", "3") == "Check again 3 hour later."


def test_a_count_whose_clause_names_the_counted_thing_its_own_way_changes_alone() -> None:
    text = "Seat 1 guest with a nut allergy away from the kitchen, and 4 guests by the window."
    at = text.index("1 guest")
    assert (
        replacement(text, at, at + 1, "3 allergies") == "3"
    )  # "guest" then becomes "guests" (noun_agreeing)
    # the noun right after the count is the rewrite's own business
    at = text.index("4 guests")
    assert replacement(text, at, at + 1, "5 guests") == "5"


@pytest.mark.parametrize(
    ("span", "new", "expected"),
    [
        ("Sunday 16 March, 01:00–03:00 UTC", "Saturday 15 March, 02:00 to 04:00",
         [("Sunday", "Saturday"), ("16", "15"), ("01:00", "02:00"), ("03:00", "04:00")]),  # "–" and "UTC" stay
        ("Thursday 27", "Friday 28th", [("Thursday", "Friday"), ("27", "28")]),  # the text writes no ordinal
        ("2 May", "28 April", [("2", "28"), ("May", "April")]),
        ("Tue 4 March", "Wednesday 5 March", [("Tue", "Wed"), ("4", "5")]),  # a short weekday stays short
        ("4 adults and 2 kids", "5 adults", None),  # one value for two
        ("between 9 and 5", "10 to 6 on weekdays", None),  # "weekdays": words the span does not write
    ],
)  # fmt: skip
def test_a_schedule_is_rewritten_value_by_value(
    span: str, new: str, expected: list[tuple[str, str]] | None
) -> None:
    out = value_by_value(span, new)
    assert (None if out is None else [(span[a:b], value) for a, b, value in out]) == expected


def test_a_tagged_part_of_a_schedule_takes_in_the_run_the_new_value_lines_up_with() -> None:
    text = "The gateway is down on Sunday 16 March from 01:00 to 03:00 UTC. Card payments fail."
    at = text.index("Sunday")
    edits = located_edits(text, 0, at, at + len("Sunday 16"), None, "Saturday 15 March, 02:00 to 04:00", 0)
    assert [(e.before, e.after) for e in edits] == [("Sunday", "Saturday"), ("16", "15"), ("01:00", "02:00"),
                                                    ("03:00", "04:00")]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "span", "new", "expected"),
    [
        ("What is the largest ocean? – The Atlantic Ocean", "Atlantic Ocean", "Pacific", "The Pacific Ocean"),
        ("We meet in the Harbour Room at 3.", "Harbour Room", "Lovelace", "the Lovelace Room at"),
        (
            "Land at Gatwick Airport, then the train.",
            "Gatwick Airport",
            "Heathrow Airport",
            "Heathrow Airport,",
        ),
        ("Your manager is Sam Patel.", "Sam Patel", "Grace", "is Grace."),  # a surname is no kind of place
    ],
)
def test_a_new_name_given_without_its_kind_keeps_the_kind_the_old_name_ends_with(
    text: str, span: str, new: str, expected: str
) -> None:
    start = text.index(span)
    edits = located_edits(text, 0, start, start + len(span), None, new, 0)
    after = text
    for e in sorted(edits, key=lambda e: -e.start):
        after = after[: e.start] + e.after + after[e.end :]
    assert expected in after
