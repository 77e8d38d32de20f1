"""The pre-defined texts of KEIC, verbatim, each with its source in the paper.

KEIC fixes the wording of every turn it adds to a conversation ("The texts (u1, b1, and b7) in italics are
pre-defined (i.e., fixed) and used in all experiments. Bold texts in Verification and Reiterate are also
pre-defined", Fig. 3 caption). The strategies use them as they are:

- the conversation frame of Fig. 3a: :data:`STORY_PROMPT` (u1), :data:`STORY_ACK` (b1),
  :data:`CORRECTION_ACK` (b7). ``keproxy.eval.keic`` builds the KEIC dialogues with the same three texts;
- Verification (§3, Fig. 3b): :data:`VERIFICATION_PROMPT` (T_v, u9) and :data:`ANSWER_EXTRACTION_PROMPT`
  (the answer-extraction turn u10, §4.3 after Kojima et al. 2022);
- Reiterate (§3, Fig. 3c): :data:`REITERATE_PROMPT` (T_r, u8);
- Deletion with the LLM backend (App. F): the story extraction template F.1 (:data:`STORY_CHECK_PROMPT`,
  :data:`STORY_MODIFY_PROMPT`, :data:`STORY_EXTRACT_PROMPT`) and the QA-pair extraction template F.2
  (:data:`QA_CHECK_PROMPT`, :data:`QA_MODIFY_PROMPT`, :data:`QA_EXTRACT_PROMPT`), and the answer the model
  gives when nothing contradicts (:data:`NO_MODIFICATION`).

Differences from the paper's typesetting, all in whitespace and quoting only: the F.1/F.2 first turns put
``Story = ...``, ``Correction = ...`` and the instruction on separate lines (the extracted paper shows them
run together on one line), and "Let's" is written with a straight apostrophe throughout.
"""

from __future__ import annotations

__all__ = [
    "ANSWER_EXTRACTION_PROMPT",
    "CORRECTION_ACK",
    "NO_MODIFICATION",
    "QA_CHECK_PROMPT",
    "QA_EXTRACT_PROMPT",
    "QA_MODIFY_PROMPT",
    "REITERATE_PROMPT",
    "STORY_ACK",
    "STORY_CHECK_PROMPT",
    "STORY_EXTRACT_PROMPT",
    "STORY_MODIFY_PROMPT",
    "STORY_PROMPT",
    "VERIFICATION_PROMPT",
]

# --- The conversation frame (Fig. 3a) --------------------------------------------------------------------

#: u1, the false phase T_f, with ``{story}`` the passage (Fig. 3a).
STORY_PROMPT = (
    "Read and memorize the following story.\n\nStory: {story}\n=====\nHave you memorized the story?"
)
#: b1, the bot's answer to u1 (Fig. 3a).
STORY_ACK = "Yes, I have memorized the story."
#: b7, the bot's answer to the correction turn T_c (Fig. 3a).
CORRECTION_ACK = (
    "No problem at all! I have updated my memory of the story with the correction you provided. "
    "Thank you for letting me know."
)

# --- Verification (§3, Fig. 3b) --------------------------------------------------------------------------

#: T_v (u9 of Fig. 3b): re-questioning after the test phase T_i.
VERIFICATION_PROMPT = "Really? Let's think about the update."
#: The answer-extraction (AE) turn (u10 of Fig. 3b, §4.3): maps the last reply onto Yes/No.
ANSWER_EXTRACTION_PROMPT = (
    "Therefore, based on your previous response, your answer to the last question is more likely to be "
    "'Yes', 'No'? You must output 'Yes' or 'No' first."
)

# --- Reiterate (§3, Fig. 3c) -----------------------------------------------------------------------------

#: T_r (u8 of Fig. 3c), asked right after the correction phase T_c.
REITERATE_PROMPT = "What's the new story with the correction? Output new story and nothing else."

# --- Deletion, LLM backend (App. F; Fig. 8) --------------------------------------------------------------

#: What the model answers in F.1/F.2 when the text does not contradict the correction (App. F, Fig. 8).
NO_MODIFICATION = "NO MODIFICATION"

#: F.1 u1 (INCONSISTENT for a story), with ``{story}`` and ``{correction}``.
STORY_CHECK_PROMPT = (
    'Story = "===={story}===="\n'
    'Correction = "===={correction}===="\n'
    "Which parts in the story contradict the correction? If the story entails the correction, output "
    "'NO MODIFICATION'. Let's read the story line by line. List all the contradictions one by one, if any."
)
#: F.1 u2 (DELETE for a story, first step).
STORY_MODIFY_PROMPT = "Can you modify the story, one by one, so that the correction entails the story?"
#: F.1 u3 (DELETE for a story: the extraction of the modified story).
STORY_EXTRACT_PROMPT = "Therefore, what is the modified story? Output the modified story and nothing else."

#: F.2 u1 (INCONSISTENT for a Q/A pair), with ``{qa}`` ("question\\nanswer") and ``{correction}``.
QA_CHECK_PROMPT = (
    'QA pair = "===={qa}===="\n'
    'Correction = "===={correction}===="\n'
    "Does the QA pair contradict the correction? If the QA pair entails the correction, output "
    "'NO MODIFICATION'. If the QA pair contradicts the correction, explain why they are contradictory in "
    "one sentence. If they are in a neutral relation, output 'NO MODIFICATION'. Let's think step by step."
)
#: F.2 u2 (DELETE for a Q/A pair, first step).
QA_MODIFY_PROMPT = (
    "Can you modify the QA pair so that it entails the correction? DO NOT modify the QA pair by copying "
    "the correction. Let's think step by step."
)
#: F.2 u3 (DELETE for a Q/A pair: the extraction of the modified pair, two lines).
QA_EXTRACT_PROMPT = (
    "Therefore, what is the modified QA pair? Your response must contain two lines only. The first line is "
    "the question, and the second line is the answer. Output the modified QA pair and nothing else."
)
