"""The learned correction pipeline with the shipped taggers, through the ``patch`` strategy: the issue's probes.

These run the real adapters (deterministic weights shipped in the package); each case is one a user would type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from keproxy.corrections.model import Tagged
from keproxy.corrections.spans import fold, named_spans, one_fact_each, oriented, same_kind, undangled
from keproxy.corrections.tagging import snap_to_words
from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions
from keproxy.editors.base import EditContext
from keproxy.editors.history.patch import PatchEditor

MEETING = "The meeting is on Tuesday at 3pm in Room 204. Please bring your laptop."


@pytest.fixture(scope="module")
def understanding() -> CorrectionUnderstanding:
    return CorrectionUnderstanding()


def forward(
    understanding: CorrectionUnderstanding, turns: Sequence[tuple[str, str]]
) -> tuple[list[str], bool]:
    messages = [{"role": role, "content": text} for role, text in turns]
    corrections = understanding.detect(messages)
    result = asyncio.run(PatchEditor().edit(messages, corrections, EditContext()))
    return [m["content"] for m in result.messages], bool(corrections)


@pytest.mark.parametrize(
    ("correction", "expected"),
    [
        ("Actually, it's at 4pm.", MEETING.replace("3pm", "4pm")),
        ("Correction: it's in Room 310.", MEETING.replace("204", "310")),
        ("Sorry, wrong day - it's on Thursday.", MEETING.replace("Tuesday", "Thursday")),
    ],
)
def test_a_correction_changes_only_the_stale_value(
    understanding: CorrectionUnderstanding, correction: str, expected: str
) -> None:
    forwarded, detected = forward(
        understanding, [("user", MEETING), ("assistant", "Noted, see you there."), ("user", correction)]
    )
    assert detected
    assert forwarded[0] == expected
    assert forwarded[1:] == ["Noted, see you there.", correction]


@pytest.mark.parametrize(
    "turn",
    ["Is it at 3pm or 4pm?", "No worries, thanks! Can you also remind me to print the slides?",
     "What if it were at 4pm instead?", "My colleague thinks it's in Room 310, but she's wrong."],
)  # fmt: skip
def test_look_alikes_forward_the_history_untouched(understanding: CorrectionUnderstanding, turn: str) -> None:
    turns = [("user", MEETING), ("assistant", "Noted, see you there."), ("user", turn)]
    forwarded, detected = forward(understanding, turns)
    assert not detected
    assert forwarded == [text for _, text in turns]


def test_a_stale_value_in_the_assistant_turn_is_fixed_too(understanding: CorrectionUnderstanding) -> None:
    forwarded, _ = forward(
        understanding,
        [("user", "Book dinner for 4 people at Luigi's on Friday."),
         ("assistant", "Done: a table for 4 people at Luigi's, Friday at 7pm."),
         ("user", "We're 6 people now.")],
    )  # fmt: skip
    assert forwarded[0] == "Book dinner for 6 people at Luigi's on Friday."
    assert forwarded[1] == "Done: a table for 6 people at Luigi's, Friday at 7pm."


def test_a_word_split_into_pieces_tagged_differently_takes_one_label() -> None:
    # "Heathrow" is word-pieced "heath" + "##row"; a tagger that labels the pieces OLD and NEW gives one OLD word
    assert snap_to_words("not Heathrow", [(4, 9, "OLD"), (9, 12, "NEW")]) == [(4, 12, "OLD")]
    assert snap_to_words("not Heathrow", [(4, 6, "OLD"), (6, 12, "NEW")]) == [(4, 12, "NEW")]


def test_each_named_old_value_pairs_with_one_new_value(understanding: CorrectionUnderstanding) -> None:
    text = "NPS was 41, not 14, and churn was 2.8%."
    spans = [
        (text.index(v), text.index(v) + len(v), stem)
        for v, stem in (("41", "NEW"), ("14", "OLD"), ("2.8%", "NEW"))
    ]
    pairs, template = understanding._values(text, Tagged(1.0, tuple(spans)))
    assert template is None
    assert pairs == [("14", "41"), (None, "2.8%")]


def test_a_named_old_value_is_the_span_wherever_the_word_tags_point() -> None:
    sentence = "I earn £2,650 a month after tax, rent is £950, bills around £300."
    tags = Tagged(0.99, ((7, 13, "STALE"),), (0.9,))  # the tagger pointed at the income
    assert named_spans(sentence, [("£950", "£1,050")]) == [(41, 45, 0)]
    assert one_fact_each(sentence, tags, [(None, "£1,050")]) == [(7, 13, 0)]
    # a named value inside another word or number is not it
    assert named_spans("Gate 14B, flight 1140", [("14", "41")]) == []


def test_one_correction_changes_one_fact_of_a_sentence() -> None:
    sentence = "The lamp gives 3,600 lumens and the budget is $3,600 for 12 lamps."
    at = sentence.index
    tags = Tagged(
        0.99,
        ((at("3,600"), at("3,600") + 5, "STALE"), (at("$3,600"), at("$3,600") + 6, "STALE")),
        (0.6, 0.95),
    )
    ((x, y, k),) = one_fact_each(sentence, tags, [(None, "$4,200")])
    assert sentence[x:y] == "$3,600" and k == 0


def test_named_correction_in_a_budget_line_keeps_the_other_amounts(
    understanding: CorrectionUnderstanding,
) -> None:
    forwarded, detected = forward(
        understanding,
        [("user", "I earn £2,650 a month after tax, rent is £950, bills around £300. How much can I save?"),
         ("assistant", "Take-home £2,650, minus rent £950 and bills £300, leaves £1,400 a month."),
         ("user", "my bad, rent is £1,050 not £950")],
    )  # fmt: skip
    assert detected
    assert (
        forwarded[0]
        == "I earn £2,650 a month after tax, rent is £1,050, bills around £300. How much can I save?"
    )
    assert "£2,650" in forwarded[1] and "£300" in forwarded[1] and "£950" not in forwarded[1]


def test_a_named_old_value_loses_the_determiner_the_history_does_not_have(
    understanding: CorrectionUnderstanding,
) -> None:
    history = [
        ("user", "Book me a table at Luigi on Saturday for four."),
        ("assistant", "Done: Luigi, Saturday at 7pm, table for four."),
    ]
    forwarded, _ = forward(understanding, [*history, ("user", "no, the Sunday, not the Saturday")])
    assert forwarded[:2] == [
        "Book me a table at Luigi on Sunday for four.",
        "Done: Luigi, Sunday at 7pm, table for four.",
    ]


def test_every_copy_of_a_named_identifier_is_renamed_and_nothing_else(
    understanding: CorrectionUnderstanding,
) -> None:
    history = [
        ("user", "Rename calc_total in billing.py so it reads better."),
        ("assistant", "Sure: rename calc_total to compute_total and update callers of calc_total."),
    ]
    turn = ("user", "the helper is actually called sum_total, calc_total was my typo")
    forwarded, _ = forward(understanding, [*history, turn])
    assert forwarded[:2] == [
        "Rename sum_total in billing.py so it reads better.",
        "Sure: rename sum_total to compute_total and update callers of sum_total.",
    ]


def test_patterns_and_learned_together_keep_the_learned_spans() -> None:
    from keproxy.corrections.detect.registry import build_detector

    detector = build_detector(["template", "cue", "learned"])
    story = "Mara opened the café at seven. The ferry from Hallsvik was cancelled twice that week."
    messages = [
        {"role": "user", "content": story},
        {"role": "assistant", "content": "What a storm."},
        {
            "role": "user",
            "content": 'Wrong. It\'s not "cancelled twice that week," but "cancelled three times that week"',
        },
    ]
    corrections = detector.detect(messages)
    assert corrections and all(c.spans for c in corrections)
    result = asyncio.run(PatchEditor().edit(messages, corrections, EditContext()))
    assert result.messages[0]["content"] == story.replace("twice", "three times")


def test_a_value_tagged_twice_is_fixed_as_the_whole_value(understanding: CorrectionUnderstanding) -> None:
    history = [
        ("user", "Please chase invoice INV-2024-9182 with the supplier."),
        ("assistant", "I'll email them today about INV-2024-9182 and ask for a payment date."),
    ]
    forwarded, detected = forward(
        understanding, [*history, ("user", "no, 3691. INV-2024-3691. I transposed it")]
    )
    assert detected
    assert forwarded[:2] == [
        "Please chase invoice INV-2024-3691 with the supplier.",
        "I'll email them today about INV-2024-3691 and ask for a payment date.",
    ]


def test_a_tagged_value_loses_the_function_words_its_tag_ran_on_into() -> None:
    assert undangled("9 cups of") == "9 cups"
    assert undangled("Room 204 in the") == "Room 204"
    assert undangled("of") == "of"  # nothing left: kept as tagged
    assert undangled("Bank of England") == "Bank of England"
    assert oriented("9 cups of", "7 cups", {"9", "cups", "of", "jasmine", "rice"}) == ("9 cups", "7 cups")


def test_a_joined_value_is_compared_by_the_part_written_like_the_new_value(
    understanding: CorrectionUnderstanding,
) -> None:
    # "192.168.7.42:5432" and "192.168.7.42" state one fact: every copy of the address changes, not the port
    history = [
        ("user", "write a .env for the api; postgres runs on 192.168.7.42:5432, database shop"),
        (
            "assistant",
            "DATABASE_URL=postgres://192.168.7.42:5432/shop\n\nMake sure 192.168.7.42 accepts connections.",
        ),
    ]
    forwarded, detected = forward(understanding, [*history, ("user", "postgres is on 192.168.7.24")])
    assert detected
    assert forwarded[:2] == [text.replace("192.168.7.42", "192.168.7.24") for _, text in history]


def tagged(text: str, values: Sequence[tuple[str, str]]) -> Tagged:
    return Tagged(1.0, tuple((text.index(v), text.index(v) + len(v), stem) for v, stem in values))


def test_a_new_value_the_history_states_as_a_whole_is_the_old_one(
    understanding: CorrectionUnderstanding,
) -> None:
    # "4.7.3"'s pieces (4, 7, 3) all occur in the history, but only "4.7.2" is stated there
    text = "the fix is in 4.7.3, 4.7.2 still had the bug"
    history = fold("broken on 4.7.0, fixed in 4.7.2. the iPad app needs 4.7.1; 3 devices")
    pairs, _ = understanding._values(text, tagged(text, [("4.7.3", "NEW"), ("4.7.2", "NEW")]), history)
    assert pairs == [("4.7.2", "4.7.3")]


def test_an_old_value_pairs_only_with_a_new_value_of_its_kind(understanding: CorrectionUnderstanding) -> None:
    text = "The first flight was 12 seconds. 59 was Wilbur's one."
    history = fold("Orville Wright flew first; the flight lasted 59 seconds. Wilbur flew the fourth.")
    pairs, _ = understanding._values(text, tagged(text, [("12 seconds", "NEW"), ("Wilbur", "NEW")]), history)
    assert pairs == [(None, "12 seconds")]


@pytest.mark.parametrize(
    ("old", "new", "ok"),
    [("Saturday", "Sunday 9 June", True), ("violin", "cello", True), ("3pm", "4pm", True),
     ("Wilbur", "12 seconds", False), ("Tuesday", "4pm", False)],
)  # fmt: skip
def test_same_kind(old: str, new: str, ok: bool) -> None:
    assert same_kind(old, new) is ok


def test_a_quoted_new_sentences_full_stop_does_not_land_inside_the_old_one(
    understanding: CorrectionUnderstanding,
) -> None:
    plan = "Day 3: the last ferry back to Hvar leaves at 19:45, so plan dinner on the island."
    correction = 'Wrong. It\'s not "the last ferry back to Hvar leaves at 19:45" but "the last ferry back to Hvar leaves at 20:30."'
    forwarded, detected = forward(
        understanding, [("user", plan), ("assistant", "Noted."), ("user", correction)]
    )
    assert detected
    assert forwarded[0] == plan.replace("19:45", "20:30")


def test_two_value_lists_in_the_same_order_pair_first_with_first(
    understanding: CorrectionUnderstanding,
) -> None:
    text = "the letter says 30 tablets with 2 refills, not 90 and 3"
    spans = [(text.index(v), text.index(v) + len(v), "NEW") for v in ("30 tablets", "2 refills")]
    spans += [(text.index("90"), text.index("90") + 2, "OLD"), (len(text) - 1, len(text), "OLD")]
    result = Tagged(1.0, tuple(spans))
    pairs, _ = understanding._values(text, result, fold("90 tablets, 3 refills remaining"))
    assert pairs == [("90", "30 tablets"), ("3", "2 refills")]


def test_an_old_value_the_new_value_restates_is_not_the_old_value(
    understanding: CorrectionUnderstanding,
) -> None:
    # "March" tagged OLD is a word of the new date: the day changed, the month did not
    text = "Pro rollout is Monday 10 March though, 3 March was the old plan."
    history = fold("Ledgerly 2.4 will be rolling out to all Pro customers on Monday, 3 March.")
    month = text.index("3 March") + 2
    new = (text.index("Monday"), text.index(" though"), "NEW")
    pairs, _ = understanding._values(text, Tagged(1.0, (new, (month, month + 5, "OLD"))), history)
    assert pairs == [(None, "Monday 10 March")]
    # an old value that differs from every word of the new one stays named
    other = "it's Monday 10 March, not 3 March"
    spans = tagged(other, [("Monday 10 March", "NEW"), ("3 March", "OLD")])
    assert understanding._values(other, spans, history)[0] == [("3 March", "Monday 10 March")]


def test_a_terse_correction_rewrites_the_value_mentioned_last() -> None:
    from keproxy.corrections.understand import CorrectionUnderstanding

    messages = [
        {"role": "user", "content": "Set a reminder to call mum on Sunday at 6pm."},
        {"role": "assistant", "content": "Reminder set: call mum, Sunday 6pm."},
        {"role": "user", "content": "Make it 7."},
    ]
    [correction] = CorrectionUnderstanding(threads=1).detect(messages)
    assert [(e.turn_index, e.before, e.after) for e in correction.spans] == [
        (0, "6pm", "7pm"),
        (1, "6pm", "7pm"),
    ]


def test_an_old_hour_is_not_taken_for_part_of_the_new_time() -> None:
    from keproxy.corrections.spans import words_within

    assert words_within("March", "Monday 10 March") and not words_within("11", "11:30")


def test_a_turn_that_makes_nothing_earlier_stale_is_no_correction(
    understanding: CorrectionUnderstanding,
) -> None:
    history = [
        "Write a short note to the lab manager asking for two boxes of nitrile gloves, size M.",
        "Hi Priya, could we order two boxes of nitrile gloves in size M for the bench? Thanks!",
    ]
    addition = chat(*history, "oh and the supplier code is GLV-2290, please include it")
    turn_tagger_alone = CorrectionUnderstanding(
        understanding.turn_tagger, understanding.stale_tagger, UnderstandingOptions(stale_evidence=0)
    )
    assert turn_tagger_alone.detect(addition)  # the turn tagger reads it as a correction...
    assert understanding.detect(addition) == []  # ...but no earlier sentence is stale
    correction = chat(*history, "no, make that three boxes, not two")
    assert understanding.detect(correction)


def chat(*turns: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]


STORY = (
    "Mara had run the café for eleven years when the storm came. It was a Tuesday in late October. "
    "Pelle said the last time he had seen the sea this grey was in 1987, the year the pier collapsed. "
    "By two o'clock the power was out across the island. The ferry would not run again until Friday."
)


def stale_inputs(understanding: CorrectionUnderstanding, messages: list[dict[str, str]]) -> list[str]:
    """The earlier sentences :meth:`CorrectionUnderstanding.detect` sends to the stale tagger."""
    sent: list[str] = []
    tag = understanding.stale_tagger.tag

    def recording(inputs: Sequence[tuple[str, str]]) -> list[Tagged]:
        sent.extend(sentence for _, sentence in inputs)
        return tag(inputs)

    understanding.stale_tagger.tag = recording  # type: ignore[method-assign]
    try:
        understanding.detect(messages)
    finally:
        del understanding.stale_tagger.tag
    return sent


def test_a_named_old_value_sends_only_the_sentences_naming_it_to_the_stale_tagger(
    understanding: CorrectionUnderstanding,
) -> None:
    messages = chat(
        "Tell me a short story about a café during a storm.", STORY, "When did the pier collapse?",
        "In 1987, according to Pelle.", "Small detail: the pier collapsed in 1978, not 1987.",
    )  # fmt: skip
    assert stale_inputs(understanding, messages) == [
        "Pelle said the last time he had seen the sea this grey was in 1987, the year the pier collapsed.",
        "In 1987, according to Pelle.",
    ]
    forwarded, detected = forward(understanding, [(m["role"], m["content"]) for m in messages])
    assert detected
    assert forwarded[1] == STORY.replace("1987", "1978") and forwarded[3] == "In 1978, according to Pelle."
    every = CorrectionUnderstanding(
        understanding.turn_tagger, understanding.stale_tagger, UnderstandingOptions(named_first=False)
    )
    assert len(stale_inputs(every, messages)) == 8  # every earlier sentence: 1 + 5 of the story + 1 + 1


def test_an_old_value_named_in_other_words_still_finds_its_sentences(
    understanding: CorrectionUnderstanding,
) -> None:
    # "12 guests" is named by "Guests: 12"; "1 guest" is in no earlier sentence, so every sentence is sent
    order = "Lunch for the board on 3 April.\n- Guests: 12\n- Price: £22 per head\n- Delivery by 12:15"
    named = chat("Confirm lunch for 12 guests on 3 April.", order, "sorry, I said 12 guests but it's 14")
    assert "- Guests: 12" in stale_inputs(understanding, named)
    assert "Lunch for the board on 3 April." not in stale_inputs(understanding, named)
    unnamed = chat("Confirm lunch for 12 people on 3 April.", order, "no, it's 14 guests, not 13 guests")
    assert "Lunch for the board on 3 April." in stale_inputs(understanding, unnamed)


def test_a_new_value_alone_sends_the_sentences_holding_a_value_of_its_kind(
    understanding: CorrectionUnderstanding,
) -> None:
    plan = (
        "Here's the plan for the book club. We meet on Friday at the Lantern Café. "
        "Bring the novel and a snack to share. Maya is hosting this month."
    )
    moved = chat("Write a reminder for the book club.", plan, "We've moved it to Saturday, same time.")
    assert stale_inputs(understanding, moved) == ["We meet on Friday at the Lantern Café."]
    forwarded, detected = forward(understanding, [(m["role"], m["content"]) for m in moved])
    assert detected and forwarded[1] == plan.replace("Friday", "Saturday")
    # a new name may be restated in any words: every sentence goes
    renamed = chat("Write a reminder for the book club.", plan, "It's at Pip's Playbarn now.")
    assert len(set(stale_inputs(understanding, renamed))) == 5


def test_a_labelled_value_found_in_one_turn_is_fixed_where_another_turn_writes_it_the_same(
    understanding: CorrectionUnderstanding,
) -> None:
    recipe = (
        "Rewrite my scone recipe in a warmer, chatty tone for my blog: 350 g self-raising flour, 1 tsp baking "
        "powder, 85 g butter, 3 tbsp caster sugar, 175 ml milk, 1 tsp vanilla."
    )
    blog = (
        "Scones are my love language. You'll need 350 g self-raising flour and 1 tsp baking powder. Rub in 85 g "
        "butter, then stir through 3 tbsp caster sugar. Warm 175 ml milk with 1 tsp vanilla and bring it together."
    )
    messages = chat(
        recipe, blog, "Oh no, I just realised it should be 2 tbsp caster sugar in my list. Sorry!"
    )
    forwarded, detected = forward(understanding, [(m["role"], m["content"]) for m in messages])
    assert detected
    assert forwarded[:2] == [recipe.replace("3 tbsp", "2 tbsp"), blog.replace("3 tbsp", "2 tbsp")]
