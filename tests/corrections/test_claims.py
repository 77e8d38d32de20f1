"""Reported claims (keproxy.corrections.claims): someone else's claim relayed with doubt is no correction."""

from __future__ import annotations

import pytest

from keproxy.corrections.claims import reported_claim


@pytest.mark.parametrize(
    "text",
    [
        "My uncle insists the wedding is in Leeds, not York. Is he right?",
        "the landlord claims the deposit was £900 not £1,100",
        "Dad reckons the ferry leaves at 6, but I think he got it wrong",
        "Jo posted in the chat that the match is on the 14th. pretty sure she's mixing it up with the cup game",
        "someone on reddit says the battery is 4,000 mAh, not 5,000. who's right?",
        "The vendor keeps saying the licence covers 20 seats.",
    ],
)
def test_another_persons_claim_is_reported(text: str) -> None:
    assert reported_claim(text)


@pytest.mark.parametrize(
    "text",
    [
        "No, it's in York, not Leeds.",
        "I said 6, not 7, sorry.",
        "As you said, the deposit is £900. Actually it's £1,100.",
        "The airline says the flight now leaves at 9:40.",  # relayed news, no doubt: may correct the history
        "Two corrections to my claim: the model is KX-20 and I bought it in May.",
        "The hotel emailed: check-in is from 3pm, not 2pm.",
        "We claimed 3 nights on the form, it was 4 nights.",
        "No, the pharmacist said 5 mg, not 10 mg. You got it wrong.",  # relayed authority, the assistant is wrong
        "My GP says the dose is 5 mg. Your table is wrong.",
    ],
)
def test_the_users_own_correction_or_relayed_news_is_not(text: str) -> None:
    assert not reported_claim(text)


def test_a_reported_claim_leaves_the_history_alone_with_the_shipped_pipeline() -> None:
    from keproxy.corrections.understand import CorrectionUnderstanding, UnderstandingOptions

    messages = [
        {"role": "user", "content": "When is the ferry on Saturday?"},
        {"role": "assistant", "content": "The Saturday ferry leaves at 7:15 from Pier 2."},
        {"role": "user", "content": "my brother insists it leaves at 6:45, not 7:15. who's right?"},
    ]
    assert CorrectionUnderstanding(threads=1).detect(messages) == []
    unchecked = CorrectionUnderstanding(threads=1, options=UnderstandingOptions(reported_claims=False))
    # the turn tagger alone reads the quote as a correction
    assert [c.new for c in unchecked.detect(messages)]
