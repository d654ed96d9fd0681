"""What a bench records about its machine: the CPU steal time a VM's host took during the run."""

from __future__ import annotations

import os
from pathlib import Path

from voicecli.bench.machine import cpu_steal_s, finish_machine_info, machine_info
from voicecli.bench.report import end_note, machine_line


def test_steal_is_the_eighth_counter_of_the_cpu_line(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1197105 0 129217 2243600 7999 0 2113 3458 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
                    encoding="ascii")
    assert cpu_steal_s(stat) == 3458 / os.sysconf("SC_CLK_TCK")
    stat.write_text("intr 1 2 3\n", encoding="ascii")
    assert cpu_steal_s(stat) is None
    assert cpu_steal_s(tmp_path / "missing") is None


def test_a_run_records_the_steal_during_it_and_the_report_says_it() -> None:
    machine = machine_info()
    assert isinstance(machine["cpu_steal_s_at_start"], float)  # this machine is Linux
    machine["cpu_steal_s_at_start"] -= 5.25  # as if the host had taken 5.25 s since the start
    finish_machine_info(machine)
    assert machine["cpu_steal_s_during"] >= 5.25 and len(machine["load_average_end_1_5_15"]) == 3
    assert "CPU steal during the run 5." in end_note(machine) and "load at the end" in end_note(machine)
    assert end_note(machine) in machine_line(machine)  # every bench's results.md says it
    assert end_note({}) == ""  # results saved before the end was recorded
