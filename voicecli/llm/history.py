"""Conversation history kept as LLM context, bounded so prompts stay fast and inside the model's window.

Voice needs three things a plain message list does not give:
- a bound: every extra token of context delays the first token of the answer (and a small local model has a
  2k window), so at most the last `max_turns` exchanges and at most `max_chars` are sent;
- a stable prefix: an LLM that keeps its context between calls (llama.cpp here, prompt caching elsewhere) only
  reads the part of the prompt that differs from the previous one. A window sliding by one exchange per turn
  changes the prompt from its first message on, every turn, once it is full: the turns bench measured a 780 ms
  first token on the turn that first overflowed (50-100 ms on the turns before). So the window moves in steps:
  when it overflows it drops to half of either bound, and the prompt then grows turn by turn again, its prefix
  unchanged, until the next overflow;
- barge-in: when the user interrupts, the model should remember what the user actually HEARD, not the whole
  answer it generated, or it will refer to things never said. `add_interrupted` records the spoken part.

Messages are stored normalized (first message from the user, roles alternating) because Bedrock rejects
anything else, and a barge-in before any speech leaves two user messages in a row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from voicecli.llm.base import ChatMessage, Role

# A rough English average for BPE tokenizers; good enough to bound context, not to bill.
CHARS_PER_TOKEN = 4


def approx_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def chars_for_tokens(tokens: int) -> int:
    return tokens * CHARS_PER_TOKEN


@dataclass
class Conversation:
    """The exchanges so far. `max_turns` counts completed user+assistant exchanges kept besides the question.

    Between `max_turns - max_turns // 2` and `max_turns` exchanges are kept (and between half of `max_chars` and
    `max_chars`): see the module docstring for why the window moves in steps.
    """

    max_turns: int = 8
    max_chars: int = chars_for_tokens(1500)
    interrupted_marker: str = "…"
    _messages: list[ChatMessage] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_turns < 0 or self.max_chars < 0:
            raise ValueError("max_turns and max_chars must be >= 0")

    def add_user(self, text: str) -> None:
        self._append("user", text)

    def add_assistant(self, text: str) -> None:
        """A complete answer (the whole of it was spoken)."""
        self._append("assistant", text)

    def add_interrupted(self, spoken: str) -> None:
        """An answer cut off by barge-in: keep only what was spoken, marked as cut off.

        Nothing spoken means nothing is recorded; the next user message then joins the unanswered one.
        """
        if spoken.strip():
            self._append("assistant", spoken.rstrip() + self.interrupted_marker)

    def messages_with(self, user_text: str) -> list[ChatMessage]:
        """The context to send for a question not yet kept: a speculative answer is generated from this, and the
        question joins the history only when the user's turn is confirmed."""
        trial = Conversation(self.max_turns, self.max_chars, self.interrupted_marker)
        trial._messages = list(self._messages)
        trial.add_user(user_text)
        return trial.messages()

    def clear(self) -> None:
        self._messages.clear()

    def __len__(self) -> int:
        return len(self._messages)

    def all_messages(self) -> list[ChatMessage]:
        """Everything still stored (the same as `messages()`: the bounds apply to what is stored)."""
        return list(self._messages)

    def messages(self) -> list[ChatMessage]:
        """The context to send: the stored turns, already within max_turns and max_chars (see `_trim`).

        The last turn (normally the question being asked) is always kept, even if it alone exceeds max_chars.
        """
        return list(self._messages)

    def _turns(self) -> list[list[ChatMessage]]:
        """Group into turns, each a user message plus its answer if any."""
        turns: list[list[ChatMessage]] = []
        for message in self._messages:
            if message.role == "user":
                turns.append([message])
            else:
                turns[-1].append(message)
        return turns

    def _trim(self) -> None:
        """Apply both bounds in steps: over either one, drop the oldest turns down to half of it.

        The last turn always survives: the pending question, or with none pending the last completed exchange.
        """
        turns = self._turns()
        pending = 1 if turns and len(turns[-1]) == 1 else 0
        limit = self.max_turns if pending else max(self.max_turns, 1)
        completed = len(turns) - pending
        if completed > limit:
            keep = limit - limit // 2  # ceil(limit / 2): 8 -> 4, 1 -> 1, 0 -> 0
            turns = turns[completed - keep :]
        size = sum(len(m.content) for turn in turns for m in turn)
        if size > self.max_chars:
            while len(turns) > 1 and size > self.max_chars // 2:
                size -= sum(len(m.content) for m in turns.pop(0))
        self._messages[:] = [m for turn in turns for m in turn]

    def _append(self, role: Role, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if not self._messages and role == "assistant":
            return  # context must open with the user
        if self._messages and self._messages[-1].role == role:
            last = self._messages.pop()
            text = f"{last.content}\n{text}"
        self._messages.append(ChatMessage(role, text))
        self._trim()
