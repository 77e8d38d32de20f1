"""Hand-written chats in the issue's styles, through the shipped learned pipeline and the history patch: what the
upstream receives. Each guards a loss of data found by probing (a fact nobody corrected, rewritten), and states
the turns exactly as they must be forwarded.

Real parts: the shipped turn and stale taggers (ONNX), :class:`CorrectionUnderstanding`, ``apply_span_edits``.
"""

from __future__ import annotations

import re

import pytest

from keproxy.corrections.understand import CorrectionUnderstanding
from keproxy.editors.history.patch import apply_span_edits


@pytest.fixture(scope="module")
def understanding() -> CorrectionUnderstanding:
    return CorrectionUnderstanding(threads=1)


def forwarded(understanding: CorrectionUnderstanding, turns: list[str]) -> list[str]:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    corrections = [c for c in understanding.detect(messages) if c.turn_index == len(messages) - 1]
    out = [dict(m) for m in messages]
    apply_span_edits(out, corrections)  # type: ignore[arg-type]
    return [m["content"] for m in out]


PROBES = [
    (  # a restated clause holding one new value changes that value only (was "Write a short note for the street
        # party raised £980.": the clause the locator chose, replaced whole, took the rest of the request with it)
        ["Write a short note for the neighbours: our street party raised £860 for the playground fund, thanks to "
         "everyone who baked.",
         "Dear neighbours,\n\nThanks to your cakes and your generosity, together we raised £860 for the new "
         "playground equipment fund! See you next summer.",
         'Actually, "The street party raised £980."'],
        ["Write a short note for the neighbours: our street party raised £980 for the playground fund, thanks to "
         "everyone who baked.",
         "Dear neighbours,\n\nThanks to your cakes and your generosity, together we raised £980 for the new "
         "playground equipment fund! See you next summer."],
    ),
    (  # a new date that keeps the day of the old one: the whole date is the value (was "by 12 April March")
        ["List the steps to renew my passport before the trip.",
         "1. Fill in the online form (about 20 minutes).\n2. Upload a photo taken in the last month.\n3. Pay the "
         "£88.50 fee.\n4. Post your old passport within 3 working days.\n5. Expect the new one by 12 March.",
         "step 5 is off by a month, the new one should come by 12 April"],
        ["List the steps to renew my passport before the trip.",
         "1. Fill in the online form (about 20 minutes).\n2. Upload a photo taken in the last month.\n3. Pay the "
         "£88.50 fee.\n4. Post your old passport within 3 working days.\n5. Expect the new one by 12 April."],
    ),
    (  # a KEIC template's old clause holds a date: its copy in another format ("9 May") changes with it
        ["Our open day is on the 9th of May, doors at 10am. Can you write a short poster text?",
         "**Open Day – 9 May**\nDoors open at 10am. Tours, taster lessons and cake. Everyone welcome!",
         'Wrong. It\'s not "Our open day is on the 9th of May", but "Our open day is on the 16th of May".'],
        ["Our open day is on the 16th of May, doors at 10am. Can you write a short poster text?",
         "**Open Day – 16 May**\nDoors open at 10am. Tours, taster lessons and cake. Everyone welcome!"],
    ),
    (  # a named old date is found in another format too ("October 3rd" for "3 Oct") and rewritten in it
        ["Draft a note to the tenants: the boiler service is on 3 Oct, engineers arrive from 8am, access to every "
         "flat needed.",
         "Dear tenants,\n\nThe annual boiler service will take place on October 3rd. Engineers will arrive from 8am "
         "and will need access to every flat.\n\nThank you,\nThe Management",
         "the service is 10 Oct, not 3 Oct"],
        ["Draft a note to the tenants: the boiler service is on 10 Oct, engineers arrive from 8am, access to every "
         "flat needed.",
         "Dear tenants,\n\nThe annual boiler service will take place on October 10th. Engineers will arrive from "
         "8am and will need access to every flat.\n\nThank you,\nThe Management"],
    ),
    (  # a count described by a word between the number and its noun ("40 wonderful years") is the same count
        ["Toast for my parents' anniversary: married 40 years, met at a dance in Leeds, 3 kids.",
         "To Mum and Dad: 40 wonderful years since that dance in Leeds, 3 kids, and more laughter than any of us "
         "can count.",
         "it's actually 45 years this June"],
        ["Toast for my parents' anniversary: married 45 years, met at a dance in Leeds, 3 kids.",
         "To Mum and Dad: 45 wonderful years since that dance in Leeds, 3 kids, and more laughter than any of us "
         "can count."],
    ),
    (  # a unit written short ("8 s") is the corrected value's unit ("10 seconds"): the user's notes change too
        ["My espresso notes: grind 18 g, pre-infuse 8 s, pull 2 shots. What yield should I aim for?",
         "Pre-infuse for 8 seconds, then aim for about 36 g out in 25-30 seconds for each of the 2 shots.",
         "the pre-infusion is 10 seconds, not 8"],
        ["My espresso notes: grind 18 g, pre-infuse 10 s, pull 2 shots. What yield should I aim for?",
         "Pre-infuse for 10 seconds, then aim for about 36 g out in 25-30 seconds for each of the 2 shots."],
    ),
    (  # the corrected "3" of "3 s" is copied only where it is seconds: "3 hubs" is another fact
        ["Notes for the smart plug manual: reset by holding the button 3 s; it pairs with up to 3 hubs.",
         "## Resetting\nHold the button for 3 seconds until the light flashes.\n\n## Pairing\n"
         "The plug pairs with up to 3 hubs at once.",
         "the reset hold is 6 seconds, not 3"],
        ["Notes for the smart plug manual: reset by holding the button 6 s; it pairs with up to 3 hubs.",
         "## Resetting\nHold the button for 6 seconds until the light flashes.\n\n## Pairing\n"
         "The plug pairs with up to 3 hubs at once."],
    ),
    (  # two values joined in one turn, the second named by its row: each replaces its own row
        ["Quarterly signups for the board slide please.",
         "| Quarter | Signups |\n|---|---|\n| Q1 | 1,240 |\n| Q2 | 1,310 |\n| Q3 | 1,480 |",
         "Q2 was 1,350 and Q3 1,420"],
        ["Quarterly signups for the board slide please.",
         "| Quarter | Signups |\n|---|---|\n| Q1 | 1,240 |\n| Q2 | 1,350 |\n| Q3 | 1,420 |"],
    ),
    (  # a weekday found by the words naming its fact; the other fact of that day, named as staying, stays
        ["Remind me: the dentist is Thursday at 10, and Thursday is also bins night.",
         "Reminders set:\n- Thursday 10:00 - dentist\n- Thursday evening - put the bins out",
         "no, the dentist is friday. bins stay thursday"],
        ["Remind me: the dentist is Friday at 10, and Thursday is also bins night.",
         "Reminders set:\n- Friday 10:00 - dentist\n- Thursday evening - put the bins out"],
    ),
    (  # a routine on the corrected event's old day keeps its day (a weekday copied on a weak relation, P 0.33)
        ["I have yoga every Tuesday. The team meeting is on Tuesday too.",
         "Got it: yoga every Tuesday, and the team meeting is on Tuesday.",
         "Sorry, the team meeting is on Wednesday."],
        ["I have yoga every Tuesday. The team meeting is on Wednesday too.",
         "Got it: yoga every Tuesday, and the team meeting is on Wednesday."],
    ),
    (  # two ages corrected at once; a later copy written with the same unit ("8-year-old") follows its age
        ["Party games for my daughters, they are 5 and 8.",
         "For a 5- and 8-year-old, a treasure hunt works well; the 8-year-old can read the clues out.",
         "Actually they're 6 and 9"],
        ["Party games for my daughters, they are 6 and 9.",
         "For a 6- and 9-year-old, a treasure hunt works well; the 9-year-old can read the clues out."],
    ),
    (  # the one time the chat mentions, for a new time that names nothing
        ["Booking summary please: table for 6 at Nonna's, 7:30pm, room B2.",
         "Booked: Nonna's, table for 6, 7:30pm, private room B2.", "it's room B4, and 8pm"],
        ["Booking summary please: table for 6 at Nonna's, 8:00pm, room B4.",
         "Booked: Nonna's, table for 6, 8:00pm, private room B4."],
    ),
    (  # counts of other things stay: only the eggs change
        ["Recipe for pancakes for 4 people?",
         "Mix 2 cups flour, 2 eggs, 1.5 cups milk, 2 tbsp sugar and 1 tsp baking powder. Cook on a medium pan "
         "for 2 minutes per side.",
         "We're out of eggs, so I only have 1 egg. Also it's 3 people, not 4."],
        ["Recipe for pancakes for 3 people?",
         "Mix 2 cups flour, 1 egg, 1.5 cups milk, 2 tbsp sugar and 1 tsp baking powder. Cook on a medium pan "
         "for 2 minutes per side."],
    ),
    (  # another item of the list stays
        ["My budget: rent 1200, groceries 400, transport 150. Total?",
         "Rent 1200 + groceries 400 + transport 150 = 1750 per month.", "Groceries are 450 actually."],
        ["My budget: rent 1200, groceries 450, transport 150. Total?",
         "Rent 1200 + groceries 450 + transport 150 = 1750 per month."],
    ),
    (  # the words around the numbers stay
        ["My kids are 4 and 6 and we're flying to Lisbon on May 3rd. Any tips?",
         "With a 4- and 6-year-old, pick morning flights to Lisbon on May 3rd.", "Actually the kids are 3 and 5."],
        ["My kids are 3 and 5 and we're flying to Lisbon on May 3rd. Any tips?",
         "With a 3- and 5-year-old, pick morning flights to Lisbon on May 3rd."],
    ),
    (  # a terse correction: the time mentioned last
        ["Set a reminder to call mum on Sunday at 6pm.", "Reminder set: call mum, Sunday 6pm.", "Make it 7."],
        ["Set a reminder to call mum on Sunday at 7pm.", "Reminder set: call mum, Sunday 7pm."],
    ),
    (  # a day of the month in the text's date format; the weekday written beside it moves with it
        ["When is the plumber coming?", "The plumber is booked for Tuesday 17 June between 10:00 and 12:00.",
         "Sorry, it's the 25th, not the 17th."],
        ["When is the plumber coming?", "The plumber is booked for Wednesday 25 June between 10:00 and 12:00."],
    ),
    (  # a date found by its day reaches every copy of the date, in the text's format
        ["We arrive on 6 August.",
         "Great, check-in is on 6 August from 3pm. I've noted 6 August for the airport transfer.",
         "No wait, we arrive on the 8th."],
        ["We arrive on 8 August.",
         "Great, check-in is on 8 August from 3pm. I've noted 8 August for the airport transfer."],
    ),
    (  # the words before the user's number are no part of the value; the article agrees with the new number
        ["My daughter Priya is 8 and loves dinosaurs. Gift ideas?",
         "For an 8-year-old dinosaur fan like Priya: a fossil dig kit or a T-rex puppet.",
         "She's turning 9 next week actually."],
        ["My daughter Priya is 9 and loves dinosaurs. Gift ideas?",
         "For a 9-year-old dinosaur fan like Priya: a fossil dig kit or a T-rex puppet."],
    ),
    (  # another time of the same sentence is another fact
        ["I'm flying out of Denver on March 14 at 6:10am.",
         "Got it: departing Denver, March 14, 6:10am. Leave home by 4:10am to clear security.",
         "Oops, the flight is at 7:40am."],
        ["I'm flying out of Denver on March 14 at 7:40am.",
         "Got it: departing Denver, March 14, 7:40am. Leave home by 4:10am to clear security."],
    ),
    (  # the distance stays: the new value's unit names which number changes
        ["I ran 5 km in 30 minutes today.", "Nice! That's a steady pace for a weekday run.",
         "Sorry, 5 km in 25 minutes."],
        ["I ran 5 km in 25 minutes today.", "Nice! That's a steady pace for a weekday run."],
    ),
    (  # a new name of two words replaces the whole written name
        ["Our team lead is Dana Cole and the sprint ends on Friday.",
         "Thanks. I'll address the summary to Dana Cole and schedule the review for Friday afternoon.",
         "The team lead changed — it's Omar Haddad now. Can you redo the summary?"],
        ["Our team lead is Omar Haddad and the sprint ends on Friday.",
         "Thanks. I'll address the summary to Omar Haddad and schedule the review for Friday afternoon."],
    ),
    (  # the new value's first word is no word the text already has: it stays ("tree nuts", not "nuts")
        ["I'm allergic to peanuts. Suggest a snack.",
         "Since you're allergic to peanuts, try apple slices with sunflower seed butter.",
         "Sorry, it's tree nuts I'm allergic to, not peanuts."],
        ["I'm allergic to tree nuts. Suggest a snack.",
         "Since you're allergic to tree nuts, try apple slices with sunflower seed butter."],
    ),
    (  # two facts in one turn: the second, which the stale tagger does not place, is found by its name
        ["Schedule: standup 9:30, design review 11:00, lunch 12:30, 1:1 with Ana 15:00.",
         "Here's your day:\n- 9:30 Standup\n- 11:00 Design review\n- 12:30 Lunch\n- 15:00 1:1 with Ana",
         "Design review moved to 14:00 and the 1:1 is at 16:00."],
        ["Schedule: standup 9:30, design review 14:00, lunch 12:30, 1:1 with Ana 16:00.",
         "Here's your day:\n- 9:30 Standup\n- 14:00 Design review\n- 12:30 Lunch\n- 16:00 1:1 with Ana"],
    ),
    (  # the title changes; the name written after it is not written twice
        ["Draft a reply to Mr. Patel confirming our call on Thursday at 10am.",
         "Dear Mr. Patel,\n\nI'm writing to confirm our call on Thursday at 10am.\n\nBest regards",
         "It's Ms. Patel, not Mr."],
        ["Draft a reply to Ms. Patel confirming our call on Thursday at 10am.",
         "Dear Ms. Patel,\n\nI'm writing to confirm our call on Thursday at 10am.\n\nBest regards"],
    ),
    (  # one sentence states two facts of one value: the one the user names changes
        ["Pick-up is at 8:00 from gate 3, drop-off at 17:00 at gate 3.",
         "Got it: pick-up 8:00 at gate 3, drop-off 17:00 at gate 3.", "Pick-up is from gate 5."],
        ["Pick-up is at 8:00 from gate 5, drop-off at 17:00 at gate 3.",
         "Got it: pick-up 8:00 at gate 5, drop-off 17:00 at gate 3."],
    ),
    (  # a 24-hour time into a text that writes 12-hour times (was "20:30pm"); the reminder's time stays
        ["Book a table for 4 at Luca's on Friday at 9pm.",
         "Done: a table for 4 at Luca's, Friday at 9pm. I'll send a reminder at 8pm.", "Make that 20:30, not 9pm."],
        ["Book a table for 4 at Luca's on Friday at 8:30pm.",
         "Done: a table for 4 at Luca's, Friday at 8:30pm. I'll send a reminder at 8pm."],
    ),
    (  # a derived total in prose follows the corrected amount, written with the text's separators
        ["Rent is $1,240 a month, plus $95 for parking.", "So $1,240 rent plus $95 parking comes to $1,335 a month.",
         "Actually rent is 1195."],
        ["Rent is $1,195 a month, plus $95 for parking.", "So $1,195 rent plus $95 parking comes to $1,290 a month."],
    ),
    (  # a copy whose thousands are grouped with a space, as the French text writes them (was left "1 800")
        ["Put this in French for my landlord: 'Please return my deposit of 2,400 euros by 30 June.'",
         "« Merci de me rembourser mon dépôt de 2 400 euros avant le 30 juin. »",
         "oops, the deposit was 2,200 not 2,400"],
        ["Put this in French for my landlord: 'Please return my deposit of 2,200 euros by 30 June.'",
         "« Merci de me rembourser mon dépôt de 2 200 euros avant le 30 juin. »"],
    ),
    (  # a new fact, not a correction: a version is never written over an address (was "the router is at 2.0.17")
        ["Our router sits at 192.168.1.1 and the NAS has 2 TB free. Write a note for the family.",
         "Note: the router is at 192.168.1.1; the NAS has 2 TB of free space.", "oh, firmware is 2.0.17 now, add that"],
        ["Our router sits at 192.168.1.1 and the NAS has 2 TB free. Write a note for the family.",
         "Note: the router is at 192.168.1.1; the NAS has 2 TB of free space."],
    ),
    (  # a count of people is no time of day (was not detected: "4" and "7pm" were two candidates, "7pm" the
        # nearer); the text names no noun after the count, so it gets none (was "a table for 6 people")
        ["Book me a table for 4 at Nando's on Friday at 7pm.",
         "Done: a table for 4 at Nando's, Friday 7pm. I'll send a reminder Thursday evening.", "Make that 6 people."],
        ["Book me a table for 6 at Nando's on Friday at 7pm.",
         "Done: a table for 6 at Nando's, Friday 7pm. I'll send a reminder Thursday evening."],
    ),
    (  # a weekday written short ("Wed") is the same day as the one written in full, and stays short (was left
        # "Wed": its sentence was no candidate, and copies were looked for in full only)
        ["Schedule: Mon yoga 7am, Wed swim 6pm, Fri run 7am.",
         "Your week: Monday yoga at 7am, Wednesday swim at 6pm, Friday run at 7am.", "swim is Thursday now"],
        ["Schedule: Mon yoga 7am, Thu swim 6pm, Fri run 7am.",
         "Your week: Monday yoga at 7am, Thursday swim at 6pm, Friday run at 7am."],
    ),
    (  # the new time goes where the turn's words frame it ("closes at 6": "closes at 5"), also in the translation
        # (was "opens at 6")
        ["Please translate to Spanish: 'The museum opens at 9 and closes at 5 on weekdays.'",
         "«El museo abre a las 9 y cierra a las 5 entre semana.»", "oh wait, it closes at 6, I misread the sign"],
        ["Please translate to Spanish: 'The museum opens at 9 and closes at 6 on weekdays.'",
         "«El museo abre a las 9 y cierra a las 6 entre semana.»"],
    ),
    (  # "Wrong, it's X." says nothing but its new value: the name last mentioned (was not detected)
        ["Quiz: What's the capital of Australia?", "Sydney.", "Wrong, it's Canberra."],
        ["Quiz: What's the capital of Australia?", "Canberra."],
    ),
    (  # two facts, the second in "new not old" form with both values tagged old: the one no turn states is the new
        # one (was left "Monday")
        ["Email to landlord: the boiler broke on Monday, plumber booked for Thursday 10am, invoice £180.",
         "I've booked a plumber for Thursday at 10am, after the boiler broke down on Monday; the invoice is £180.",
         "invoice is £210, and it broke Sunday not Monday"],
        ["Email to landlord: the boiler broke on Sunday, plumber booked for Thursday 10am, invoice £210.",
         "I've booked a plumber for Thursday at 10am, after the boiler broke down on Sunday; the invoice is £210."],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("turns", "expected"), PROBES)
def test_only_what_the_correction_makes_false_changes(
    understanding: CorrectionUnderstanding, turns: list[str], expected: list[str]
) -> None:
    assert forwarded(understanding, turns)[:-1] == expected


def test_a_code_is_not_what_an_hour_becomes(understanding: CorrectionUnderstanding) -> None:
    """Two facts in one turn: the flat's code replaces the flat's code, never an hour ("from 7C until 1").
    (The second fact, "until 12", is not extracted by the turn tagger: a known miss, not asserted.)"""
    turns = [
        "please help me write message to the gas engineer. I live at Flat 7A, 3 Orchard Close. The boiler makes "
        "loud bang since Tuesday. I am home tomorrow from 9 until 1.",
        "Hello,\n\nMy boiler has been making a loud banging noise since Tuesday. My address is Flat 7A, 3 Orchard "
        "Close. I will be at home tomorrow from 9am to 1pm. Could you visit during that time?\n\nThank you,\n"
        "[Your name]",
        "sorry, is Flat 7C, and tomorrow I am home only until 12",
    ]
    out = forwarded(understanding, turns)
    assert all("Flat 7C, 3 Orchard" in text for text in out[:2])
    assert not any(re.search(r"(?:from|until|to) \d+[A-Z]", text) for text in out[:2])


@pytest.mark.xfail(
    strict=True,
    reason="the stale tagger relates a routine on the corrected event's old day to the correction (P >= 0.5) and "
    "tags its weekday: 'I have pilates every Thursday.' moves with the dentist appointment",
)
def test_a_routine_on_the_old_day_keeps_it_when_the_tagger_relates_it(
    understanding: CorrectionUnderstanding,
) -> None:
    turns = ["I have pilates every Thursday. The dentist appointment is on Thursday too.",
             "Got it: pilates every Thursday, and the dentist appointment is on Thursday.",
             "Sorry, the dentist appointment is on Friday."]  # fmt: skip
    assert forwarded(understanding, turns)[:2] == [
        "I have pilates every Thursday. The dentist appointment is on Friday too.",
        "Got it: pilates every Thursday, and the dentist appointment is on Friday.",
    ]


def test_a_self_correction_changes_the_value_said_in_its_frame(
    understanding: CorrectionUnderstanding,
) -> None:
    # "I'm 32" corrects "I'm 34", not the partner's 36 (was "my partner is 32"); the years derived from it in
    # the answer are another matter (not asserted)
    turns = [
        "I'm 34 and my partner is 36. We want to retire at 60.",
        "You have 26 years until retirement, and your partner has 24. That's a good horizon for index funds.",
        "oops, I'm 32",
    ]
    out = forwarded(understanding, turns)
    assert out[0] == "I'm 32 and my partner is 36. We want to retire at 60."
    assert "your partner has 24" in out[1]


def test_a_count_goes_to_the_key_that_names_it_and_code_stays_code(
    understanding: CorrectionUnderstanding,
) -> None:
    # "make it 5 retries": the value of ``retries=3`` (was the expression "retries - 1", written over with
    # "5 retries"), and the request's "3 times" keeps its own noun (was "5 retries times")
    code = (
        "import time\n\ndef fetch_with_retry(fn, retries=3, delay=2):\n    for attempt in range(retries):\n"
        "        try:\n            return fn()\n        except Exception:\n            if attempt == retries - 1:\n"
        "                raise\n            time.sleep(delay)"
    )
    turns = [
        "Write a Python function that retries a request 3 times with a 2 second delay.",
        code,
        "make it 5 retries",
    ]
    out = forwarded(understanding, turns)
    assert out[0] == "Write a Python function that retries a request 5 times with a 2 second delay."
    assert out[1] == code.replace("retries=3", "retries=5")
