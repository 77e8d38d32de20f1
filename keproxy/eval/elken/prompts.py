"""ELKEN's prompts: the answer instructions of Table 12 (with the event; the same without it for f_θ) and the
Tendency-G judge prompts of Table 13 (rubric for in-scope answers, consistency for out-of-scope ones)."""

from __future__ import annotations

from keproxy.eval.elken.data import ElkenQuestion

__all__ = [
    "CONSISTENCY_PROMPT",
    "FACT_INSTRUCTION",
    "FACT_INSTRUCTION_NO_EVENT",
    "RUBRIC_PROMPT",
    "TENDENCY_G_INSTRUCTION",
    "TENDENCY_G_INSTRUCTION_NO_EVENT",
    "TENDENCY_M_INSTRUCTION",
    "TENDENCY_M_INSTRUCTION_NO_EVENT",
    "question_prompt",
]

# ELKEN Table 12 (with the event); without it (f_θ, no edit: the "before editing" answers locality compares
# against) upstream's local-question instructions (data_processor/processor.py @ f42fbdd, FactDataProcessor
# with only_local, TendencyLocalDataProcessor), which drop the "respond with 'unknown'" sentence.
FACT_INSTRUCTION = (
    "Given an event, assuming that the event has occurred, please answer the corresponding questions based on "
    "the event and your own knowledge. If you do not know the answer to the question, please respond with "
    "'unknown'. Please only output a noun (usually an entity) as the answer, and do not output a complete "
    "sentence."
)
FACT_INSTRUCTION_NO_EVENT = (
    "Please answer the question based on your knowledge. Please only output a noun (usually an entity) as the "
    "answer, and do not output a complete sentence."
)
TENDENCY_M_INSTRUCTION = (
    "Given an event, assuming that the event has occurred, please answer the corresponding questions based on "
    "the event and your knowledge. Please only output the option A, B, or C as the answer, and do not output "
    "brackets. Do not output a complete sentence or the full answer span."
)
TENDENCY_M_INSTRUCTION_NO_EVENT = (
    "Please answer the question based on your knowledge. Please only output the option A, B, or C as the "
    "answer, and do not output brackets. Do not output a complete sentence or the full answer span."
)
TENDENCY_G_INSTRUCTION = (
    "Given an event, assuming that the event has occurred, please answer the corresponding questions based on "
    "the event and your knowledge."
)
TENDENCY_G_INSTRUCTION_NO_EVENT = "Please answer the questions based on your knowledge."

# ELKEN Table 13 (one demonstration each; the paper uses two, the second is not printed).
RUBRIC_PROMPT = """You are a fair assessment expert, and you will be given a set of (event, question, answer, label) quadruples. The answer is obtained by answering the question based on the event (assuming the event has occurred). The answer usually consists of a judgment (or a claim) and some reasons (or explanations) for the judgment. The label is a general judgment annotated by humans for the question. Your task is to score the answers according to the following requirements:
a. You should score the answer based on the provided label.
b. You should rate the answer on 4 metrics, for the first 3 metrics, assign a score between 1 and 5, with 5 being the highest:
1. For accuracy, you will score whether the answer correctly answers the question, i.e., whether the judgment in the answer is consistent with the provided label.
2. For coherence, you will assess whether the reasons and explanations in the answer are reasonable and logically consistent.
3. For comprehensive, you will determine if the answer covers multiple aspects of the reasons and explanations and provides a comprehensive response.
4. Finally, you will provide an overall score between 1 and 5, with 5 being the highest. If accuracy <= 3, the overall should not be higher than 3.
You should only give the integer score. DO NOT complete the answer!

Demonstration
Input: Event: Google reveals plans to create a virtual reality metaverse platform.
Question: How could the job market be influenced by the integration of the metaverse platform?
Answer: As a result of the integration of a virtual reality metaverse platform, the job market could see significant changes and new opportunities. Industries related to virtual reality, augmented reality, and computer graphics may experience an increased demand for skilled professionals, such as software developers, 3D modelers, user experience designers, and virtual environment architects. Overall, the integration of the metaverse platform may create a need for a diverse range of new skills and roles within the job market.
Label: Increase in demand for VR-related professionals
Output: accuracy: 5; coherence: 5; comprehensiveness: 5; overall: 5

Input: Event: {event}
Question: {question}
Answer: {answer}
Label: {label}
Output:"""

CONSISTENCY_PROMPT = """You are a fair assessment expert, and please decide whether the two answers below are consistent. Your task is to score the consistency of the two answers according to the following requirements:
1. You should assign a consistency score between 1 and 5, with 5 being the highest.
2. Please score primarily on the basis of the tendency judgments in the two answers, and score 1 if the tendencies mentioned in two answers are completely inconsistent.
Please output the score directly, like Score: 3. Please do not answer with any text, just output the score.

Input:
Answer1: {before}
Answer2: {after}
Output:"""


def question_prompt(fmt: str, question: ElkenQuestion, event: str | None) -> str:
    """The prompt of one question in format ``fmt`` ("fact", "tendency-m" or "tendency-g"): ELKEN Table 12's
    instruction with ``event`` in context, or upstream's instruction for local questions when ``event`` is
    None; the input laid out as upstream's processor does ("Event: ...\nQuestion: ...\n(A) .. (B) .. (C)
    ..\nAnswer:", the options line for Tendency-M only)."""
    if fmt == "fact":
        head = FACT_INSTRUCTION if event else FACT_INSTRUCTION_NO_EVENT
        ask = question.question
    elif fmt == "tendency-m":
        head = TENDENCY_M_INSTRUCTION if event else TENDENCY_M_INSTRUCTION_NO_EVENT
        ask = f"{question.question}\n{question.candidate}" if question.candidate else question.question
    else:
        head = TENDENCY_G_INSTRUCTION if event else TENDENCY_G_INSTRUCTION_NO_EVENT
        ask = question.question
    body = f"Event: {event}\nQuestion: {ask}\nAnswer:" if event else f"Question: {ask}\nAnswer:"
    return f"{head}\n\n{body}"
