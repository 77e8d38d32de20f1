"""One fact per correction, wherever the chat states it (keproxy.corrections.consolidate)."""

from __future__ import annotations

import pytest

from keproxy.corrections.base import SpanEdit
from keproxy.corrections.bounds import narrow, whole_token
from keproxy.corrections.consolidate import (
    Found,
    copies,
    current,
    distinctive,
    one_fact,
    propagate,
    restated,
    restated_words,
    standalone,
    states,
    typed_candidates,
    value_key,
)
from keproxy.corrections.counts import counted, labelled, with_counted_noun
from keproxy.corrections.fit import support
from keproxy.corrections.rewrite import replacement, word_changes
from keproxy.corrections.siblings import (
    label_before,
    labelled_copies,
    old_in_new_form,
    one_value_per_sentence,
)
from keproxy.corrections.spans import named_in_full, named_spans


@pytest.mark.parametrize(
    ("text", "key"),
    [("£1,050", "1050"), ("5-night", "5"), ("3.14", "3.14"), ("Twins", "twin"), ("Glasgow", "glasgow")],
)
def test_value_key(text: str, key: str) -> None:
    assert value_key(text) == key


@pytest.mark.parametrize("text", ["5050", "4.7.2", "20-45-77", "harbour2291", "calc_vat", "Glasgow", "3B"])
def test_distinctive_values(text: str) -> None:
    assert distinctive(text)


@pytest.mark.parametrize("text", ["12", "Tuesday", "main", "March", "it", "*"])
def test_common_values(text: str) -> None:
    assert not distinctive(text)


def test_one_fact_keeps_the_named_value_only() -> None:
    texts = ["Tomas was nine and Ines was six."]
    found = [Found(0, 11, 15, 0, 1.5, named=True), Found(0, 28, 31, 0, 0.9)]
    assert one_fact(found, texts, lambda f: f.weight) == [found[0]]


def test_one_fact_drops_a_value_that_fits_much_worse() -> None:
    texts = ["Height: 55 cm, and the box is 35 cm tall; 35 cm fits."]
    good = [Found(0, 30, 32, 0, 0.6), Found(0, 42, 44, 0, 0.5)]
    poor = Found(0, 8, 10, 0, 0.1)
    kept = one_fact([poor, *good], texts, lambda f: f.weight * 3)
    assert kept == good


@pytest.mark.parametrize("order", [0, 1])
def test_one_fact_breaks_a_tie_by_the_value_written_first_never_by_set_order(order: int) -> None:
    texts = ["Bosch KGN36: 186 cm tall, Beko CFG4686: 182 cm tall."]
    spans = [Found(0, 6, 11, 0, 0.5), Found(0, 13, 16, 0, 0.5), Found(0, 31, 38, 0, 0.5)]
    found = spans if order == 0 else spans[::-1]
    kept = one_fact(found, texts, lambda f: 0.5)
    assert [texts[0][f.start : f.end] for f in kept] == ["KGN36"]


def test_propagate_reaches_every_copy_of_a_distinctive_value() -> None:
    texts = ["wifi is Calder-Guest", "Join Calder-Guest. Password on the card.", "thanks"]
    found = [Found(1, 5, 17, 0, 0.8)]
    out = propagate(texts, [0, 1, 2], found, lambda turn, at: 0.0)
    assert {(f.turn, texts[f.turn][f.start : f.end]) for f in out} == {
        (0, "Calder-Guest"),
        (1, "Calder-Guest"),
    }


def test_propagate_leaves_a_common_word_in_an_unrelated_sentence() -> None:
    texts = ["The meeting is on Tuesday. I have yoga every Tuesday.", "Tuesday at 3pm it is."]
    found = [Found(1, 0, 7, 0, 0.9)]
    related = {(0, 18): 0.6}  # the tagger scored the meeting sentence, not the yoga one

    def score(turn: int, at: int) -> float:
        return related.get((turn, at), 0.0)

    out = propagate(texts, [0, 1], found, score)
    assert {(f.turn, f.start) for f in out} == {(1, 0), (0, 18)}


def test_propagate_copies_a_single_digit_only_after_the_same_word() -> None:
    texts = [
        "Meet at pitch 4 at 9:45, 4 subs on the bench.",
        "Kick-off at Hillside, pitch 4.",
        "it's pitch 6",
    ]
    found = [Found(1, 28, 29, 0, 0.9)]
    out = propagate(texts, [0, 1], found, lambda turn, at: 0.9)
    assert {(f.turn, f.start) for f in out} == {(1, 28), (0, 14)}  # not the "4" of "4 subs"


def test_an_amount_before_a_rates_unit_is_a_whole_word() -> None:
    text = "quoted 6 hours at £95/hour, 3/4 of it on Saturday"
    at = text.index("95")
    assert standalone(text, at, at + 2, loose=False)
    assert not standalone(text, text.index("3/4"), text.index("3/4") + 1, loose=False)


def test_support_prefers_the_span_next_to_the_corrected_attribute() -> None:
    texts = ["Weight: 12 kg. Height: 35 cm."]
    weight, height = Found(0, 8, 10, 0, 0.5), Found(0, 23, 25, 0, 0.5)
    turn = "the box height is 38 cm"
    assert support(height, texts, turn, "38 cm") > support(weight, texts, turn, "38 cm")


def test_a_named_one_word_old_value_takes_the_matching_word_of_the_new_value() -> None:
    sentence = "We stay at Via dei Serragli 27 in Florence."
    at = sentence.index("27")
    assert replacement(sentence, at, at + 2, "number 72", "27") == "72"
    assert replacement("Order a size M.", 13, 14, "size L", "M") == "L"


def test_typed_candidates_are_values_of_the_new_values_kind() -> None:
    sentence = "Box: 60 × 40 × 35 cm, packed on Tuesday (Ø 45 cm)."
    found = [sentence[x:y] for x, y in typed_candidates(sentence, "38 cm")]
    assert found == ["60", "40", "35", "45"]
    assert [sentence[x:y] for x, y in typed_candidates(sentence, "Friday")] == ["Tuesday"]
    assert typed_candidates(sentence, "cardboard") == []
    # a name for a name, but the pronoun "I" is none (was "Udon have two cats" under "I forgot Udon")
    said = "I have two cats, Miso and Tofu."
    assert [said[x:y] for x, y in typed_candidates(said, "Udon")] == ["Miso", "Tofu"]


def test_a_named_identifier_takes_the_most_alike_word_of_the_new_value() -> None:
    sentence = "Call fetch_user_orders(id) first."
    at = sentence.index("fetch_user_orders")
    got = replacement(sentence, at, at + 17, "called fetch_customer_orders", "fetch_user_orders")
    assert got == "fetch_customer_orders"


def test_a_distinctive_value_is_found_inside_a_joined_token_a_common_one_is_not() -> None:
    text = "Run on localhost:5050 with process.env.DATABASE_URL; 12.5 kg"
    at = text.index("5050")
    assert standalone(text, at, at + 4, loose=True)
    assert not standalone(text, at, at + 4, loose=False)
    at = text.index("DATABASE_URL")
    assert standalone(text, at, at + 12, loose=True)
    at = text.index("12")
    assert not standalone(text, at, at + 2, loose=False)
    assert not standalone("DATABASE_URLS", 0, 12, loose=True)


def test_a_joined_span_is_narrowed_to_the_part_written_like_the_new_value() -> None:
    text = "REDIS_URL=redis://10.0.4.71:6379/2"
    at = text.index("10.0.4.71")
    start, end = narrow(text, at, len(text), "10.0.4.17")
    assert text[start:end] == "10.0.4.71"
    assert narrow(text, at, at + 9, "10.0.4.17") == (at, at + 9)


def test_part_of_an_identifier_is_widened_when_the_new_value_carries_the_rest() -> None:
    text = "Sure: rename calc_total to compute_total."
    at = text.index("calc")
    start, end = whole_token(text, at, at + 4, "sum_total")
    assert text[start:end] == "calc_total"
    # a new value that does not carry the rest leaves the span as tagged
    assert whole_token(text, at, at + 4, "sum") == (at, at + 4)
    # a whole word is left alone
    assert whole_token(text, at, at + 10, "sum_total") == (at, at + 10)


def test_the_new_sentences_full_stop_does_not_land_inside_the_old_one() -> None:
    sentence = "The last boat leaves at **19:45**, arriving 20:50."
    at = sentence.index("19:45")
    old, new = "The last boat leaves at 19:45", "The last boat leaves at 20:30."
    assert replacement(sentence, at, at + 5, new, old) == "20:30"


def test_support_prefers_the_value_carrying_the_new_values_unit() -> None:
    texts = ["Inverter 5 kW peak; a 10 kWh pack."]
    inverter, pack = Found(0, 9, 10, 0, 0.5), Found(0, 22, 24, 0, 0.5)
    assert texts[0][9:10] == "5" and texts[0][22:24] == "10"
    turn = "the quote should have the 9 kWh model"
    assert support(pack, texts, turn, "9 kWh") > support(inverter, texts, turn, "9 kWh")


def test_a_three_word_new_value_is_a_phrase_not_a_value_kind() -> None:
    assert typed_candidates("Drove 44 miles in the old green Volvo in 1994.", "red Saab 900") == []


@pytest.mark.parametrize(
    ("span", "new", "said"),
    [("125", "125 g", True), ("1,050.00", "1050", True), ("Yusuf", "yusuf", True), ("3A", "3B", False),
     ("100", "125 g", False), ("12", "125", False), ("7a", "7a+", False), ("16+", "16", False),
     ("7a+", "7a+", True)],
)  # fmt: skip
def test_a_span_states_the_new_value_only_with_the_same_numbers_and_letters(
    span: str, new: str, said: bool
) -> None:
    assert states(span, new) is said


def test_a_span_that_already_states_the_new_value_is_not_stale() -> None:
    texts = ["Frosting: 125 g butter.", "- 100 g butter, softened"]
    right, stale = Found(0, 10, 13, 0, 0.99), Found(1, 2, 5, 0, 0.98)
    assert current([right, stale], texts, ["125 g"]) == [stale]
    assert one_fact(current([right, stale], texts, ["125 g"]), texts, lambda f: f.weight) == [stale]


def test_support_reads_the_words_of_the_spans_own_line() -> None:
    # a list item's neighbour on the next line ("butter") is another fact, not this span's attribute
    texts = ["- 100 g butter, softened\n- 250 g cream cheese"]
    butter, cheese = Found(0, 2, 5, 0, 0.5), Found(0, 27, 30, 0, 0.5)
    turn = "the butter for the topping is wrong, 125 g"
    assert support(butter, texts, turn, "125 g") > support(cheese, texts, turn, "125 g")


def _spans(texts: list[str], words: list[str], *, named: bool = False) -> list[Found]:
    out = []
    for w in words:
        turn = next(i for i, t in enumerate(texts) if w in t)
        at = texts[turn].index(w)
        out.append(Found(turn, at, at + len(w), 0, 0.9, named))
    return out


def test_the_attribute_the_correcting_turn_names_is_not_the_stale_value() -> None:
    texts = ["my daughter Maya (6) has a peanut allergy", "Hi! Maya has a peanut allergy."]
    turn = "Maya's allergy is to sesame."
    found = _spans(texts, ["allergy", "Hi! Maya"[4:], "peanut"])
    kept = restated(found, texts, turn, [(None, "sesame")])
    # "allergy": a word the turn uses; "Maya": a name ("my daughter Maya") for a lowercase new value
    assert [texts[f.turn][f.start : f.end] for f in kept] == ["peanut"]


def test_numbers_names_and_named_values_stay_candidates() -> None:
    texts = ["Tomas was nine. The Lamb & Flag at 7pm."]
    turn = "Tomas should be eleven, he'd be offended at nine. The Lamb & Flag closed: The Crown & Anchor"
    found = _spans(texts, ["nine", "Lamb"])
    assert restated(found, texts, turn, [(None, "eleven")])[0] == found[0]  # a number word
    assert restated(found[1:], texts, turn, [(None, "Crown & Anchor")]) == found[1:]  # a name for a name
    named = _spans(texts, ["Tomas"], named=True)
    assert restated(named, texts, turn, [("Tomas", "Tom")]) == named  # the user named it


def test_a_capital_at_the_head_of_a_list_item_is_not_a_name() -> None:
    texts = ["Specs:\n- Charging: micro-USB\n- Battery: 2 h"]
    turn = "The charging port in there is the prototype's. Production units have usb-c."
    found = _spans(texts, ["Charging", "micro-USB"])
    assert restated(found, texts, turn, [(None, "usb-c")]) == found[1:]  # "Charging": the attribute


def test_counts_of_other_things_are_not_the_count_the_correction_names() -> None:
    text = "Mix 2 cups flour, 2 eggs, 1.5 cups milk and 2 tbsp sugar."
    found = [Found(1, 4, 5, 0, 0.5), Found(1, 18, 19, 0, 0.5), Found(1, 44, 45, 0, 0.5)]  # "2" x 3
    kept = counted(found, ["", text], [(None, "1 egg")])
    assert [text[f.start : f.end] for f in kept] == ["2 eggs"]  # widened over its noun: weighed as "2 eggs"
    assert replacement(text, kept[0].start, kept[0].end, "1 egg") == "1 egg"


def test_without_the_counted_noun_in_the_chat_every_count_stays() -> None:
    text = "My 2 children and 2 dogs."
    found = [Found(1, 3, 4, 0, 0.5), Found(1, 18, 19, 0, 0.5)]
    assert counted(found, ["", text], [(None, "3 kids")]) == found  # "kids" is nowhere: no evidence


def test_the_counted_noun_in_other_words_keeps_the_number_alone() -> None:
    text = "The survey had 430 responses and took 12 minutes."
    found = [Found(1, 15, 18, 0, 1.5, named=True), Found(1, 38, 40, 0, 0.5)]
    kept = counted(
        found,
        ["", text],
        [
            ("430", "340 respondents"),
        ],
    )
    assert [text[f.start : f.end] for f in kept] == [
        "430"
    ]  # "responses" ~ "respondents"; "12 minutes" dropped


def test_a_number_followed_by_a_function_word_is_not_a_count_of_something_else() -> None:
    text = "A table for 6 at Nonna's, and 2 chairs."
    found = [Found(1, 12, 13, 0, 0.5), Found(1, 30, 31, 0, 0.5)]
    kept = counted(found, ["", text], [(None, "4 chairs")])
    assert [text[f.start : f.end] for f in kept] == ["6", "2 chairs"]


def test_with_counted_noun_widens_only_over_the_same_noun() -> None:
    text = "for 8 hours and 8 days"
    assert with_counted_noun(text, 4, 5, "10 hours") == 11
    assert with_counted_noun(text, 16, 17, "10 hours") == 17
    assert with_counted_noun(text, 4, 5, "10") == 5


def test_a_number_right_after_the_counted_noun_labels_one_and_is_not_the_count() -> None:
    text = "Day 3: Trastevere. Enjoy your 3 days in Rome!"
    found = [Found(1, 4, 5, 0, 0.5), Found(1, 30, 31, 0, 0.5)]
    kept = counted(found, ["", text], [(None, "4 days")])
    assert [text[f.start : f.end] for f in kept] == ["3 days"]


def test_a_value_in_another_list_item_of_the_line_is_another_facts() -> None:
    text = "My budget: rent 1200, groceries 400, transport 150. Total?"
    found = [Found(1, text.index("400"), text.index("400") + 3, 0, 0.5),
             Found(1, text.index("150"), text.index("150") + 3, 0, 0.5)]  # fmt: skip
    kept = labelled(found, ["", text], "Groceries are 450 actually.", [(None, "450")])
    assert [text[f.start : f.end] for f in kept] == ["400"]


def test_items_are_not_compared_when_the_turn_names_nothing_they_say() -> None:
    text = "Ward 7B, 3rd floor, St Mary's."
    found = [Found(1, 5, 7, 0, 0.5), Found(1, 9, 18, 0, 0.5)]
    # "floor" is a word of the new value: the "3rd floor" item is named too, so neither span is dropped
    assert (
        labelled(found, ["", text], "the ward moved up one level, 4th floor", [(None, "4th floor")]) == found
    )


def test_a_named_digit_reaches_its_copies_in_related_sentences_but_not_list_numbers() -> None:
    # "not 90 and 3": the user named "3"; its copy in a related sentence is as stale, the item number is not
    texts = [
        "90 tablets, 3 refills.",
        "1. Name\n3. Quantity: 90 tablets\n4. Refills remaining: 3\n5. Payment",
    ]
    found = [Found(0, texts[0].index("3"), texts[0].index("3") + 1, 0, 1.99, named=True)]
    out = propagate(texts, [0, 1], found, lambda turn, at: 0.5)
    assert {(f.turn, f.start) for f in out} == {(0, texts[0].index("3")), (1, texts[1].rindex("3"))}
    # a single digit the user did not name is too common to copy
    assert propagate(texts, [0, 1], [Found(0, 12, 13, 0, 0.9)], lambda turn, at: 0.5) == [
        Found(0, 12, 13, 0, 0.9)
    ]


def test_a_restated_clauses_changed_time_is_changed_in_the_flagged_sentences_only() -> None:
    plan = "The doors open at 7 pm and the show starts at 8 pm."
    advice = "Since the show starts at 8 pm, book dinner early. The bus leaves at 8 pm too."
    texts = [plan, advice, "it's: The doors open at 7 pm and the show starts at 8:30 pm"]
    messages = [{"role": "assistant", "content": t} for t in texts[:2]] + [
        {"role": "user", "content": texts[2]}
    ]
    new = "The doors open at 7 pm and the show starts at 8:30 pm"
    whole = [SpanEdit(0, 0, len(plan) - 1, plan[:-1], new, 0)]
    flagged = [(1, 0, advice.index(" The bus"))]  # the tagger flagged the show sentence, not the bus one
    out = restated_words(messages, texts, 2, set(), whole, flagged)
    assert [(e.turn_index, e.before, e.after) for e in out] == [(0, plan[:-1], new), (1, "8", "8:30")]
    assert out[1].start == advice.index("8 pm")
    # with no flagged sentence, a common value changes nowhere else
    assert restated_words(messages, texts, 2, set(), whole) == whole


def test_word_changes_lines_up_the_words_of_a_restated_clause() -> None:
    assert word_changes("the show starts at 8 pm.", "the show starts at 8:30 pm") == [("8", "8:30")]
    before, after = (
        "it was handed to DPD on 5 June at the depot.",
        "It was handed to Evri on 6 June at the depot",
    )
    assert word_changes(before, after) == [("DPD", "Evri"), ("5", "6")]
    assert word_changes("the show starts at 8 pm", "a late start for everybody tonight") == []


def test_a_named_amount_finds_its_copies_written_with_zero_cents() -> None:
    texts = ["Adults €17.50, children €7.00, under-5s free.", "So €7 per child, €7.50 for the guide."]
    found = [texts[t][a:b] for t, a, b in copies(texts, [0, 1], "€7", lambda t, at: 1.0, min_score=0.5)]
    assert found == ["€7.00", "€7"]  # "€7.50" is another amount


def test_one_fact_keeps_one_value_the_one_stated_most() -> None:
    # "7:40am" said for the flight: the departure time stated twice is the stale value, the time to leave home
    # (tagged in the same sentence, nearly as confidently) is another fact and stays
    texts = ["Flying at 6:10am.", "Departing 6:10am. Leave home by 4:10am."]
    twice = [Found(0, 10, 16, 0, 0.8), Found(1, 10, 16, 0, 0.8)]
    other = Found(1, 32, 38, 0, 0.9)
    assert one_fact([*twice, other], texts, lambda f: f.weight) == twice


def test_a_span_of_several_numbers_narrows_to_the_one_with_the_new_values_unit() -> None:
    text = "I ran 5 km in 30 minutes today."
    start, end = narrow(text, 6, 16, "25 minutes")  # the tagger's span "5 km in 30"
    assert text[start:end] == "30"
    assert narrow(text, 6, 16, "25") == (6, 16)  # no unit in the new value: nothing to choose by
    text = "2 hours and 30 minutes, then 15 minutes of rest"
    assert narrow(text, 0, 36, "20 minutes") == (0, 36)  # two numbers in minutes: which one is not known


@pytest.mark.parametrize(
    ("text", "span", "new", "expected"),
    [
        ("Our team lead is Dana Cole and the sprint ends Friday.", "Cole", "Omar Haddad", "Dana Cole"),
        ("Dear Dana Cole,", "Cole", "Omar Haddad", "Dana Cole"),  # "Dear" opens the sentence: no part of it
        ("Dana Cole is here.", "Cole", "Omar", "Cole"),  # a one-word new value: the span stays
        ("Ask Dana Cole today.", "Cole", "the new lead", "Cole"),  # no name in the new value
        (
            "Party at the Lantern Café, 3pm.",
            "Lantern",
            "Pip's Playbarn",
            "Lantern Café",
        ),  # accents, apostrophes
    ],
)
def test_a_word_of_a_name_widens_to_the_name_for_a_new_name(
    text: str, span: str, new: str, expected: str
) -> None:
    at = text.index(span)
    start, end = whole_token(text, at, at + len(span), new)
    assert text[start:end] == expected


def test_a_span_of_words_holding_one_number_narrows_to_it_for_a_bare_new_number() -> None:
    text = "The recipe wants two tablespoons of honey, stirred in warm."
    at = text.index("two tablespoons")
    start, end = narrow(text, at, at + len("two tablespoons"), "three")
    assert text[start:end] == "two"
    # a new value with its own words, or a span with two numbers, is left as it is
    assert narrow(text, at, at + len("two tablespoons"), "three teaspoons") == (
        at,
        at + len("two tablespoons"),
    )
    text = "Boil 2 eggs for 7 minutes."
    assert narrow(text, 5, 25, "3") == (5, 25)


def test_a_common_value_written_again_under_the_same_label_is_the_same_fact() -> None:
    said = "log my bike ride: 42 km, avg HR 148, elevation 610 m"
    summary = "Distance: 42 km\nAvg HR: 148 bpm\nMax HR: 148 bpm\nElevation: 610 m"
    at = said.index("148")
    out = labelled_copies([said, summary], [0, 1], [SpanEdit(0, at, at + 3, "148", "152", 1)])
    assert [(e.turn_index, e.start, e.after) for e in out] == [
        (
            1,
            summary.index("148"),
            "152",
        )
    ]  # not Max HR


def test_a_common_value_written_again_between_the_same_numbers_is_the_same_fact() -> None:
    said = "Grade calc: scores 72, 85, 90, 64, 78. Homework average 88."
    worked = "Test average: (72 + 85 + 90 + 64 + 78) / 5 = 389 / 5 = 77.8. The final exam lasts 64 minutes."
    at = said.index("64")
    out = labelled_copies([said, worked], [0, 1], [SpanEdit(0, at, at + 2, "64", "74", 0)])
    assert [(e.turn_index, e.start) for e in out] == [(1, worked.index("64"))]  # not the exam's 64


def test_a_common_value_under_a_label_naming_what_it_counted_is_the_same_fact() -> None:
    said = "It's levothyroxine 75 mcg, 90 tablets, 3 refills."
    listed = "1. Your full name\n3. Quantity: 90 tablets\n4. Refills remaining: 3\n5. Prescriber name"
    at = said.index("3 refills")
    out = labelled_copies([said, listed], [0, 1], [SpanEdit(0, at, at + 1, "3", "2", 1)])
    # the list item's label names refills; "3." numbers a list item, and a refill count is not a quantity
    assert [(e.turn_index, e.start, e.after) for e in out] == [(1, listed.rindex("3"), "2")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Avg HR: 148", "avg hr"), ("total cost = £95", "total cost"), ("the price is 95", ""), ("95", "")],
)
def test_a_label_is_the_two_words_before_a_value_on_its_line(text: str, expected: str) -> None:
    assert label_before(text, len(text) - (3 if text.endswith("148") else 2)) == expected


def test_one_new_value_is_written_over_one_value_of_a_list_the_one_most_like_it() -> None:
    said = "Route grades: 6a, 6a+, 6b. Log it for me."
    log = "Sent three routes: 6a, 6a+ and 6b. Solid session, the 6b was the highlight."
    texts = [said, log]
    edits = [
        SpanEdit(t, texts[t].index(v, at), texts[t].index(v, at) + len(v), v, "6b+", 0)
        for t, v, at in [(0, "6a", 0), (0, "6a+", 0), (0, "6b", 0), (1, "6a", 0), (1, "6a+", 0), (1, "6b", 0)]
    ]
    kept = one_value_per_sentence(texts, edits)
    assert [(e.turn_index, e.before) for e in kept] == [(0, "6b"), (1, "6b")]
    # one value per sentence: nothing to choose
    assert one_value_per_sentence(texts, edits[2:3]) == edits[2:3]


@pytest.mark.parametrize(
    ("text", "tagged", "expected"),
    [
        ("they go out on monday night now", "night", "monday night"),  # a weekday names the night
        ("It's at Pip's Playbarn now.", "Playbarn", "Pip's Playbarn"),  # the name's first word
        ("Playbarn it is.", "Playbarn", "Playbarn"),
        ("Thanks. Marta Playbarn", "Playbarn", "Playbarn"),  # a sentence's first word may be any word
        ("Sorry. Playbarn", "Playbarn", "Playbarn"),
        ("it's at the green room", "room", "room"),  # a plain word before a plain word
    ],
)
def test_a_tagged_new_value_takes_in_the_words_of_its_name(text: str, tagged: str, expected: str) -> None:
    at = text.index(tagged)
    assert text[named_in_full(text, at, at + len(tagged)) : at + len(tagged)] == expected


def test_the_old_number_written_the_way_the_new_value_is_written_is_the_stale_one() -> None:
    texts = [
        "I ordered 3 packs of 40-count nappies.",
        "3 packs × 40 = 120 nappies.",
        "no, they're 36-count, not 40",
    ]
    out = old_in_new_form(texts, [0, 1], [("40", "36-count")], [])
    assert [(e.turn_index, e.before, e.after) for e in out] == [(0, "40-count", "36-count")]
    assert old_in_new_form(texts, [0, 1], [("40", "36")], []) == []  # a bare number: the locator's job


def test_a_named_letter_is_found_in_its_own_case_and_never_after_an_apostrophe() -> None:
    sentence = "Hi Jordan, I'm so sorry: we're sending a size M replacement, not the m-size."
    found = named_spans(sentence, [("M", "size L")])
    assert [sentence[a:b] for a, b, _ in found] == ["M"]
    assert not standalone(sentence, sentence.index("m so"), sentence.index("m so") + 1, loose=True)  # "I'm"
