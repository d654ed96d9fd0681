"""A progress bar on stderr while a bench runs (minutes on a CPU), so stdout stays clean for the summary."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class BenchProgress:
    """`with BenchProgress(total) as bar: bar.step("batch run 1")`; `bar.note(...)` prints a line above the bar."""

    def __init__(self, total: int | None, title: str) -> None:
        """`total` None: not known yet (set it with `set_total` once it is)."""
        self.console = Console(stderr=True)
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=self.console, transient=False)
        self._task = self._progress.add_task(title, total=total)
        self._title = title
        self._what = ""

    def __enter__(self) -> BenchProgress:
        self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._progress.stop()

    def set_total(self, total: int) -> None:
        self._progress.update(self._task, total=total)

    def describe(self, what: str) -> None:
        self._what = what
        self._progress.update(self._task, description=f"{self._title}: {what}")

    def step(self) -> None:
        self._progress.advance(self._task)
        if not self.console.is_terminal:  # no live bar in a log file: one line per finished step instead
            task = self._progress.tasks[0]
            self.console.print(f"{self._title}: {int(task.completed)}/{int(task.total or 0)} done ({self._what})")

    def note(self, message: str) -> None:
        self._progress.console.print(message)
