"""Conversation history kept as LLM context, bounded so prompts stay fast and inside the model's window.

Voice needs two things a plain message list does not give:
- a bound: every extra token of context delays the first token of the answer (and a small local model has a
  2k window), so only the last `max_turns` exchanges and at most `max_chars` are sent;
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
    """The exchanges so far. `max_turns` counts completed user+assistant exchanges kept besides the question."""

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
        """Everything still stored (already limited to the last max_turns exchanges plus the question)."""
        return list(self._messages)

    def messages(self) -> list[ChatMessage]:
        """The context to send: newest turns first to survive, within max_turns and max_chars.

        The last turn (normally the question being asked) is always kept, even if it alone exceeds max_chars.
        """
        turns = self._turns()
        if not turns:
            return []
        kept = [turns[-1]]
        used = sum(len(m.content) for m in turns[-1])
        for turn in reversed(turns[:-1]):
            size = sum(len(m.content) for m in turn)
            if used + size > self.max_chars:
                break
            kept.append(turn)
            used += size
        return [message for turn in reversed(kept) for message in turn]

    def _turns(self) -> list[list[ChatMessage]]:
        """Group into turns, each a user message plus its answer if any."""
        turns: list[list[ChatMessage]] = []
        for message in self._messages:
            if message.role == "user":
                turns.append([message])
            else:
                turns[-1].append(message)
        pending = 1 if turns and len(turns[-1]) == 1 else 0
        # max_turns completed exchanges, plus the pending question; with none pending the last
        # completed exchange is the one that must survive.
        keep = self.max_turns + pending if pending else max(self.max_turns, 1)
        return turns[-keep:]

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
        self._messages[:] = [m for turn in self._turns() for m in turn]
