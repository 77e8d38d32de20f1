"""End-to-end tier: ``keproxy serve`` as a real process on the embedded SmolLM2 model (llama-cpp-python's
server as its child), driven with the official ``openai`` client over loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

pytestmark = pytest.mark.e2e

STORY = (
    "Read and memorize the following story.\n\nStory: Otto the tortoise lived in a garden in Lisbon. "
    "Every afternoon he ate three lettuce leaves under the fig tree. His best friend was a sparrow named Pia."
    "\n=====\nHave you memorized the story?"
)


@pytest.fixture(scope="module")
def server(e2e_server: str) -> str:
    """The session's ``keproxy serve`` on the embedded model (``tests/conftest.py``), shared with the other
    end-to-end modules."""
    return e2e_server


@pytest.fixture
def sdk(server: str) -> Iterator[openai.OpenAI]:
    """The openai client on the server, closed after the test (an unclosed one leaves a socket to the GC)."""
    with openai.OpenAI(base_url=f"{server}/v1", api_key="keproxy", max_retries=0, timeout=120) as client:
        yield client


def test_models_lists_local_alias(sdk: openai.OpenAI) -> None:
    assert [m.id for m in sdk.models.list()] == ["smollm2"]


def test_non_streaming_with_correction_is_patched_and_logged(server: str, sdk: openai.OpenAI) -> None:
    messages = [
        {"role": "user", "content": STORY},
        {"role": "assistant", "content": "Yes, I have memorized the story."},
        {
            "role": "user",
            "content": 'I think "three lettuce leaves" is wrong, so it should be "two ripe figs"',
        },
        {"role": "assistant", "content": "No problem at all!"},
        {"role": "user", "content": "What did Otto eat every afternoon?"},
    ]
    raw = sdk.chat.completions.with_raw_response.create(
        model="smollm2", messages=messages, max_tokens=16, temperature=0
    )
    completion = raw.parse()
    assert completion.choices[0].message.content
    assert completion.usage is not None and completion.usage.prompt_tokens > 50
    request_id = raw.headers["x-keproxy-request-id"]
    assert raw.headers["x-keproxy-edits"] == "1"
    row = httpx.get(f"{server}/keproxy/transcripts/{request_id}", timeout=10).json()
    assert "he ate two ripe figs under the fig tree" in row["forwarded_messages"][0]["content"]
    assert row["original_messages"] == messages
    assert row["final_response"]["choices"][0]["message"]["content"] == completion.choices[0].message.content
    assert row["upstream_model"] == "openai/smollm2"
    assert row["latency_ms"]["upstream"] > 0


def test_streaming_yields_incremental_chunks(server: str, sdk: openai.OpenAI) -> None:
    with sdk.chat.completions.with_streaming_response.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Count from one to ten in words."}],
        max_tokens=32,
        temperature=0,
        stream=True,
    ) as response:
        request_id = response.headers["x-keproxy-request-id"]
        pieces = []
        for chunk in response.parse():
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
    assert len(pieces) > 3  # many chunks, not one buffered answer
    row = httpx.get(f"{server}/keproxy/transcripts/{request_id}", timeout=10).json()
    assert row["stream"] is True
    assert row["status"] == 200
    assert row["final_response"]["choices"][0]["message"]["content"] == "".join(pieces)
