"""The built-in question sets of the benches: what each question says and which answers count as right.

Three sets, one job each:
- `latency`: eight short questions, half with a mid-sentence pause, spoken by espeak-ng: the felt-latency set the
  README's turn figures have always been measured on (some open questions, timed but not scored).
- `quality`: 36 simple factual questions a person asks a voice assistant, each with accepted answers. This is the
  set prompts, sampling and model choices may be tuned on (voicecli/bench/questions.py voices it with several
  Kokoro voices and espeak-ng, at several speaking rates, some with noise or a pause).
- `holdout`: 20 more questions of the same kind, voiced the same way, that nothing is tuned on: the figures that
  say whether a choice made on `quality` generalises come from here.

A question is a tuple of segments: between two segments the voicing inserts a silence (a speaker thinking
mid-sentence), which is where an end-of-turn detector is tempted to answer too early. Accepted answers are matched
as whole words or phrases after voicecli.bench.scoring.words (case, punctuation, number words), any one counts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuestionSpec:
    """One built-in question: its spoken segments and its accepted answers (empty: open, timed but not scored)."""

    segments: tuple[str, ...]
    answers: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(self.segments)


def _q(text: str, *answers: str) -> QuestionSpec:
    """`text` with "|" where the speaker pauses."""
    return QuestionSpec(tuple(part.strip() for part in text.split("|")), answers)


LATENCY: tuple[QuestionSpec, ...] = (
    _q("What is the capital of France?", "paris"),
    _q("What is the capital of | Italy?", "rome"),
    _q("Name a large animal."),
    _q("How many legs does | a spider have?", "8"),
    _q("What color is the sky?", "blue"),
    _q("What do you call | a baby cat?", "kitten"),
    _q("How many days are in a week?", "7"),
    _q("Tell me the name of | a big river."),
)

QUALITY: tuple[QuestionSpec, ...] = (
    _q("What is the capital of Spain?", "madrid"),
    _q("How many legs does a spider have?", "8"),
    _q("What color is the sky on a clear day?", "blue"),
    _q("What do you call | a baby cat?", "kitten"),
    _q("What is five plus seven?", "12"),
    _q("What is ten minus four?", "6"),
    _q("Which ocean lies between Europe | and North America?", "atlantic"),
    _q("How many days are there in a leap year?", "366"),
    _q("What do bees make?", "honey"),
    _q("At what temperature does water freeze | in degrees Celsius?", "0"),
    _q("What is the opposite of hot?", "cold"),
    _q("How many wheels does a bicycle have?", "2"),
    _q("What is the largest planet | in our solar system?", "jupiter"),
    _q("Who wrote Romeo and Juliet?", "shakespeare"),
    _q("What is the capital of Japan?", "tokyo"),
    _q("How many hours are in a day?", "24"),
    _q("What gas do plants take in | from the air?", "carbon dioxide", "co2"),
    _q("How many continents are there?", "7"),
    _q("What is the tallest animal in the world?", "giraffe", "giraffes"),
    _q("What color are ripe bananas?", "yellow"),
    _q("How many minutes are in an hour?", "60"),
    _q("At what temperature does water boil | in degrees Celsius?", "100"),
    _q("Which planet is known as the red planet?", "mars"),
    _q("What is three times four?", "12"),
    _q("What language do people speak | in Brazil?", "portuguese"),
    _q("What is the capital of Germany?", "berlin"),
    _q("How many months are in a year?", "12"),
    _q("What is the fastest land animal?", "cheetah", "cheetahs"),
    _q("What is the closest star to the Earth?", "sun"),
    _q("Which animal says moo?", "cow", "cows"),
    _q("Who painted | the Mona Lisa?", "leonardo", "da vinci"),
    _q("What is the largest ocean on Earth?", "pacific"),
    _q("How many sides does a triangle have?", "3"),
    _q("What is the capital of | the United Kingdom?", "london"),
    _q("What is the freezing point of water in Fahrenheit?", "32"),
    _q("What is the biggest animal | in the ocean?", "blue whale", "blue whales"),
)

HOLDOUT: tuple[QuestionSpec, ...] = (
    _q("What is the capital of Italy?", "rome"),
    _q("How many legs does a dog have?", "4"),
    _q("What is two plus two?", "4"),
    _q("What color is grass?", "green"),
    _q("What is the capital of | Canada?", "ottawa"),
    _q("How many sides does a square have?", "4"),
    _q("What is the opposite of up?", "down"),
    _q("What do you call | a baby dog?", "puppy"),
    _q("Which planet do we live on?", "earth"),
    _q("What is the largest country | in the world?", "russia"),
    _q("What is nine minus three?", "6"),
    _q("How many seconds are in a minute?", "60"),
    _q("What is frozen water called?", "ice"),
    _q("Who was the first president | of the United States?", "washington"),
    _q("What is the capital of Egypt?", "cairo"),
    _q("What color is snow?", "white"),
    _q("What do caterpillars turn into?", "butterfly", "butterflies", "moth", "moths"),
    _q("How many weeks are in a year?", "52"),
    _q("What language do people speak | in Mexico?", "spanish"),
    _q("Which animal is called the king of the jungle?", "lion", "lions"),
)

ENDPOINTING: tuple[QuestionSpec, ...] = (
    _q("What is the capital of | Spain?"),
    _q("Tell me | the opposite of | hot."),
    _q("I need eggs, | milk, | and bread."),
    _q("Um, | what time is it | in Tokyo?"),
    _q("How many legs does | uh | a spider have?"),
    _q("Can you tell me | how far the moon is?"),
    _q("What is the biggest | um | planet?"),
    _q("Add apples, | bananas, | and oranges to my list."),
    _q("I was wondering | if you could | help me with something."),
    _q("What do you call | a baby | cat?"),
    _q("Set a timer for | ten minutes."),
    _q("Who wrote | uh | Romeo and Juliet?"),
    _q("Remind me to call | my mother | tomorrow."),
    _q("What is the weather like | in | London today?"),
    _q("So | the thing is, | I forgot my password."),
    _q("Play some music | by | the Beatles."),
    _q("How do I | um | boil an egg?"),
    _q("My favourite colours are red, | blue, | and green."),
    _q("What is five plus | seven?"),
    _q("Translate good morning | into | French."),
    _q("Well, | I think | the answer is no."),
    _q("Which is bigger, | the sun | or the earth?"),
    _q("Give me a recipe for | uh | pancakes."),
    _q("What's the difference between | a frog | and a toad?"),
    _q("Turn off | the lights | in the kitchen."),
    _q("How long does it take | to fly | from Paris to Rome?"),
    _q("Tell me a joke | about | dogs."),
    _q("I want to book a table | for two | at eight."),
    _q("What does | uh | photosynthesis mean?"),
    _q("Call | um | the dentist."),
)
"""30 utterances for `voicecli bench endpointing`, each with hesitations where a detector is tempted to end the
turn: fillers ("um", "uh"), list pauses ("eggs, | milk, | and bread"), and breaks after unfinished phrases ("the
capital of | ... Spain", "Tell me | the opposite of | hot"). Open (no accepted answers): what matters is where each
pause and the real end are, not what is answered. The pause lengths are the bench's (400-1,500 ms)."""

SETS: dict[str, tuple[QuestionSpec, ...]] = {"latency": LATENCY, "quality": QUALITY, "holdout": HOLDOUT,
                                            "endpointing": ENDPOINTING}
"""Every built-in set by the name `--set` takes."""
TUNED_ON: frozenset[str] = frozenset({"latency", "quality", "endpointing"})
"""The sets choices may be tuned on; `holdout` is not, and results say which kind of set they come from."""
