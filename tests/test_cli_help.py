"""``bnn-zoo --help`` lists every command with a line of what it does; every flag of every command
has a help line, and ``--help`` prints defaults as they are typed."""

import argparse
import dataclasses
import importlib

import pytest

from bnn_zoo import cli
from bnn_zoo.experiments.harness.flags import Parser

COMMANDS = {**cli.EXPERIMENTS, **cli.TOOLS}


def parser(name: str) -> argparse.ArgumentParser:
    """The parser ``bnn-zoo <name>`` parses its flags with."""
    from bnn_zoo.experiments.harness.fit_flags import build_parser

    module = importlib.import_module(f"bnn_zoo.experiments.{COMMANDS[name].module}")
    prog = f"bnn-zoo {name}"
    if hasattr(module, "build_parser"):  # uci, sweep, report, alternatives
        return module.build_parser(prog)
    if hasattr(module, "EXPERIMENT"):  # regression, mnist-cnn, mnist-bbb
        return build_parser(module.EXPERIMENT, prog)
    return build_parser(module.experiment(name if name in ("moons", "circles") else None), prog)


def test_help_lists_every_command_with_what_it_does(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("usage: bnn-zoo {moons,circles,toy,")
    listed = {line.split()[0]: line.split(None, 1)[1] for line in out if line.startswith("  ")}
    assert listed == {name: command.summary for name, command in COMMANDS.items()}
    sections = [line.split()[0] if line.startswith("  ") else line for line in out[1:] if line]
    assert sections == ["experiments:", *cli.EXPERIMENTS, "tools:", *cli.TOOLS]


def test_no_command_is_one_line_on_stderr(capsys):
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("bnn-zoo: error: no command; valid: moons,")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_flag_has_help_and_its_default_as_typed(name):
    p = parser(name)
    missing = [a.option_strings or a.dest for a in p._actions if not (a.help or "").strip()]
    assert missing == []
    text = p.format_help()
    assert "(default: (" not in text and "(default: [" not in text
    assert "(default: False)" not in text and "(default: True)" not in text  # a switch has no typed value


def test_defaults_are_printed_as_the_user_types_them():
    from bnn_zoo.experiments.harness.flags import int_list

    p = Parser(prog="x")
    p.add_argument("--hidden", type=int_list, default=(5, 5), help="layers")
    p.add_argument("--channels", type=int, nargs="+", default=[32, 32], help="filters")
    p.add_argument("--decay", type=int_list, default=(), help="epochs")
    p.add_argument("--rate", type=float, default=0.5, help="at 50%% of it")
    p.add_argument("--quick", action="store_true", help="fast")
    text = " ".join(p.format_help().split())
    for shown in ("layers (default: 5,5)", "filters (default: 32 32)", "epochs (default: none)",
                  "at 50% of it (default: 0.5)", "--quick fast"):
        assert shown in text
    assert "fast (default" not in text


def test_path_derivative_help_says_the_library_default_and_why_the_command_differs():
    import bnn_zoo
    from bnn_zoo.experiments.harness.config import RunConfig

    library = bnn_zoo.ELBO().path_derivative
    command = {f.name: f.default for f in dataclasses.fields(RunConfig)}["path_derivative"]
    assert (library, command) == (None, False)  # if these meet, the help below has nothing to explain
    [flag] = [a for a in parser("moons")._actions if "--path-derivative" in a.option_strings]
    help_text = " ".join(flag.help.split())
    assert "ELBO(path_derivative=None)" in help_text and "docs/reproductions.md" in help_text
