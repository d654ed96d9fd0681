"""Shell completion for bash, zsh and fish, generated from the argparse parser itself.

Why generated: a hand-written script drifts from the commands the moment an option is added; reading the parser
(`voicecli completion bash`) means completion always offers exactly what `--help` shows. No dependency: the three
scripts share one shape. A word loop walks the command line through a transition table (`case "PATH|WORD"`: a
sub-command moves down the tree, an option that takes a value skips that value), then the candidates for the node
reached are offered: sub-commands, options, an option's choices, or file names for options that take a path.

Install: `voicecli completion bash > ~/.local/share/bash-completion/completions/voicecli`, `voicecli completion zsh
> "${fpath[1]}/_voicecli"`, `voicecli completion fish > ~/.config/fish/completions/voicecli.fish` (or `source
<(voicecli completion bash)` for the current shell).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...]
    path: bool
    """The value is a file or directory name."""


@dataclass(frozen=True)
class Node:
    """One (sub)command: `path` is the words that reach it, from the program name on."""

    path: tuple[str, ...]
    commands: tuple[tuple[str, str], ...]
    """(name, help) of each sub-command."""
    options: tuple[Option, ...]
    values: tuple[str, ...] = ()
    """Choices of its positional arguments (`voicecli completion SHELL`), offered like sub-commands."""

    @property
    def key(self) -> str:
        return " ".join(self.path)


def nodes(parser: argparse.ArgumentParser, path: tuple[str, ...] | None = None) -> Iterator[Node]:
    """Every command of `parser`, depth first, read from argparse's own records of its actions."""
    path = path or (parser.prog.split()[0],)
    commands: list[tuple[str, str]] = []
    children: list[tuple[str, argparse.ArgumentParser]] = []
    options: list[Option] = []
    values: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                commands.append((name, helps.get(name, "")))
                children.append((name, child))
        elif action.option_strings:
            takes_value = action.nargs != 0
            choices = tuple(str(c) for c in action.choices) if action.choices is not None else ()
            options.append(Option(tuple(action.option_strings), _plain(action.help), takes_value, choices,
                                  takes_value and action.type is Path))
        elif action.choices is not None:
            values += [str(c) for c in action.choices]
    yield Node(path, tuple(commands), tuple(options), tuple(values))
    for name, child in children:
        yield from nodes(child, (*path, name))


def _plain(text: str | None) -> str:
    """Help text fit for a one-line description: argparse's %(default)s-style markers and SUPPRESS dropped."""
    if not text or text == argparse.SUPPRESS:
        return ""
    return " ".join(text.split()).replace("%%", "%")


def _quote(text: str) -> str:
    """Single-quoted, the same for bash, zsh and fish. A quote inside is dropped: only help text can hold one, and
    the three shells escape it three different ways."""
    return "'" + text.replace("'", "") + "'"


def _transitions(tree: list[Node]) -> list[str]:
    """`case` arms shared by bash and zsh: move down on a sub-command, skip an option's value."""
    arms = []
    for node in tree:
        for name, _ in node.commands:
            arms.append(f"            {_quote(node.key + '|' + name)}) cmdpath={_quote(node.key + ' ' + name)} ;;")
        valued = [flag for option in node.options if option.takes_value for flag in option.flags]
        if valued:
            patterns = "|".join(_quote(node.key + "|" + flag) for flag in valued)
            arms.append(f"            {patterns}) skip=1 ;;")
    return arms


def _posix_tables(tree: list[Node]) -> tuple[list[str], list[str]]:
    """(candidates per node, candidates per node|previous option) for bash and zsh."""
    per_node = []
    per_option = []
    for node in tree:
        words = " ".join([*(name for name, _ in node.commands), *node.values])
        flags = " ".join(flag for option in node.options for flag in option.flags)
        per_node.append(f"        {_quote(node.key)}) commands={_quote(words)}; options={_quote(flags)} ;;")
        for option in node.options:
            if not option.takes_value:
                continue
            patterns = "|".join(_quote(node.key + "|" + flag) for flag in option.flags)
            if option.choices:
                per_option.append(f"        {patterns}) choices={_quote(' '.join(option.choices))} ;;")
            elif option.path:
                per_option.append(f"        {patterns}) choices=FILE ;;")
            else:
                per_option.append(f"        {patterns}) choices=VALUE ;;")
    return per_node, per_option


def bash(parser: argparse.ArgumentParser) -> str:
    tree = list(nodes(parser))
    prog = tree[0].key
    per_node, per_option = _posix_tables(tree)
    return "\n".join([
        f"# bash completion for {prog}, generated by `{prog} completion bash`.",
        f"_{prog}_complete() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" cmdpath=' + _quote(prog) + " word i skip=0",
        '    local commands="" options="" choices=""',
        '    [ "$COMP_CWORD" -gt 0 ] && prev="${COMP_WORDS[COMP_CWORD-1]}"',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        if [ "$skip" = 1 ]; then skip=0; continue; fi',
        '        case "$cmdpath|$word" in',
        *_transitions(tree),
        "        esac",
        "    done",
        '    if [ "$skip" = 1 ]; then',
        '        case "$cmdpath|$prev" in',
        *per_option,
        "        esac",
        "    fi",
        '    case "$cmdpath" in',
        *per_node,
        "    esac",
        '    if [ "$choices" = FILE ]; then',
        '        COMPREPLY=($(compgen -f -- "$cur"))',
        '    elif [ "$choices" = VALUE ]; then',
        "        COMPREPLY=()",
        '    elif [ -n "$choices" ]; then',
        '        COMPREPLY=($(compgen -W "$choices" -- "$cur"))',
        '    elif [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$options" -- "$cur"))',
        "    else",
        '        COMPREPLY=($(compgen -W "$commands" -- "$cur"))',
        "    fi",
        "}",
        f"complete -o default -F _{prog}_complete {prog}",
        "",
    ])


def zsh(parser: argparse.ArgumentParser) -> str:
    tree = list(nodes(parser))
    prog = tree[0].key
    per_node, per_option = _posix_tables(tree)
    return "\n".join([
        f"#compdef {prog}",
        f"# zsh completion for {prog}, generated by `{prog} completion zsh`.",
        f"_{prog}_complete() {{",
        "    local cur=${words[CURRENT]} prev=${words[CURRENT-1]} cmdpath=" + _quote(prog) + " word i skip=0",
        '    local commands="" options="" choices=""',
        "    for ((i = 2; i < CURRENT; i++)); do",
        "        word=${words[i]}",
        '        if [[ "$skip" = 1 ]]; then skip=0; continue; fi',
        '        case "$cmdpath|$word" in',
        *_transitions(tree),
        "        esac",
        "    done",
        '    if [[ "$skip" = 1 ]]; then',
        '        case "$cmdpath|$prev" in',
        *per_option,
        "        esac",
        "    fi",
        '    case "$cmdpath" in',
        *per_node,
        "    esac",
        '    if [[ "$choices" = FILE ]]; then',
        "        _files",
        '    elif [[ "$choices" = VALUE ]]; then',
        "        _message value",
        '    elif [[ -n "$choices" ]]; then',
        "        compadd -- ${=choices}",
        '    elif [[ "$cur" = -* ]]; then',
        "        compadd -- ${=options}",
        "    else",
        "        compadd -- ${=commands}",
        "    fi",
        "}",
        'if [[ "${zsh_eval_context[-1]}" = loadautofunc ]]; then',
        f'    _{prog}_complete "$@"',
        "else",
        f"    compdef _{prog}_complete {prog}",
        "fi",
        "",
    ])


def fish(parser: argparse.ArgumentParser) -> str:
    tree = list(nodes(parser))
    prog = tree[0].key
    lines = [
        f"# fish completion for {prog}, generated by `{prog} completion fish`.",
        f"function __{prog}_path",
        f"    set -l cmdpath {_quote(prog)}",
        "    set -l skip 0",
        "    set -l tokens (commandline -opc)",
        "    set -e tokens[1]",
        "    for word in $tokens",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        '        switch "$cmdpath|$word"',
    ]
    for node in tree:
        for name, _ in node.commands:
            lines += [f"            case {_quote(node.key + '|' + name)}",
                      f"                set cmdpath {_quote(node.key + ' ' + name)}"]
        valued = [flag for option in node.options if option.takes_value for flag in option.flags]
        if valued:
            lines += ["            case " + " ".join(_quote(node.key + "|" + flag) for flag in valued),
                      "                set skip 1"]
    lines += ["        end", "    end", "    echo $cmdpath", "end", f"complete -c {prog} -f"]
    for node in tree:
        condition = f"-n {_quote(f'test (__{prog}_path) = {_fish_word(node.key)}')}"
        for name, text in node.commands:
            lines.append(f"complete -c {prog} {condition} -a {_quote(name)} -d {_quote(text)}")
        if node.values:
            lines.append(f"complete -c {prog} {condition} -a {_quote(' '.join(node.values))}")
        for option in node.options:
            names = " ".join(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
                             for flag in option.flags)
            extra = ""
            if option.choices:
                extra = f" -x -a {_quote(' '.join(option.choices))}"
            elif option.path:
                extra = " -r -F"
            elif option.takes_value:
                extra = " -x"
            lines.append(f"complete -c {prog} {condition} {names}{extra} -d {_quote(option.help)}")
    return "\n".join([*lines, ""])


def _fish_word(text: str) -> str:
    """A node's path as one word inside the single-quoted condition (double quotes keep its spaces)."""
    return '"' + text + '"'


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` (one of SHELLS)."""
    generators = {"bash": bash, "zsh": zsh, "fish": fish}
    return generators[shell](parser)
