"""Flag parsing shared by the experiments: one-line errors and checked values.

Every command of ``bnn-zoo`` parses its flags with these: :class:`Parser` and
:class:`HelpFormatter` (an error is one line and exit code 2; ``--help``
shows the defaults as they are typed), the ``type=`` checkers that turn a flag's text into a
checked value (:func:`positive_int`, :func:`n_train`, :func:`fraction`,
:func:`names`, :func:`int_list`, ...), and :class:`UsageError` with
:func:`check_writable` for what can only be checked after parsing.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

__all__ = ["HelpFormatter", "Parser", "UsageError", "check_writable", "fraction", "int_list", "n_train", "names",
           "nonneg_float", "nonneg_int", "positive_float", "positive_int", "seed", "unit_interval"]


class UsageError(ValueError):
    """A bad combination of arguments, found after parsing: one line on stderr, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2.

    :meth:`error` prints ``"<prog>: error: <message>"`` alone, without
    argparse's usage block, and exits with code 2. Everything else is
    ``argparse.ArgumentParser``'s, and so are the parameters.

    Parameters
    ----------
    prog : str, optional
        The program's name in messages; default the script's file name.
    usage : str, optional
        The usage line; default built from the arguments.
    description : str, optional
        The text ``--help`` shows before the arguments.
    epilog : str, optional
        The text ``--help`` shows after the arguments.
    parents : list of argparse.ArgumentParser, default []
        Parsers whose arguments this one takes too.
    formatter_class : type, default HelpFormatter
        The help's formatter (:class:`HelpFormatter`: each flag's default).
    prefix_chars : str, default "-"
        The characters that start an optional argument.
    fromfile_prefix_chars : str, optional
        The characters that start an argument naming a file of arguments;
        default none.
    argument_default : object, optional
        Every argument's default, unless the argument sets its own.
    conflict_handler : str, default "error"
        What two arguments with the same option string do: ``"error"`` or
        ``"resolve"``.
    add_help : bool, default True
        Add ``-h``/``--help``.
    allow_abbrev : bool, default True
        Accept an unambiguous prefix of a long option.
    exit_on_error : bool, default True
        Exit on a bad argument's type or value (through :meth:`error`)
        instead of raising ``argparse.ArgumentError``.
    """

    def __init__(self, *args, formatter_class=None, **kwargs):
        super().__init__(*args, formatter_class=formatter_class or HelpFormatter, **kwargs)

    def error(self, message):
        """Print ``"<prog>: error: <message>"`` on stderr and exit with code 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


class HelpFormatter(argparse.HelpFormatter):
    """Appends each flag's default to its help, as the user would type it.

    ``(default: 5,5)`` for a comma-separated list (``(default: 32 32)`` for
    a flag that takes several words), ``(default: none)`` for an empty one.
    Nothing is appended where the default is ``None`` (the help says what
    happens), for a flag that takes no value (``--float32``) or a positional
    argument, or where the help already names its default. A
    :class:`Parser`'s default ``formatter_class``, which makes it; the
    parameters are argparse's.

    Parameters
    ----------
    prog : str
        The program's name in the usage line.
    indent_increment : int, default 2
        The indent of each nested level of the help, in characters.
    max_help_position : int, default 24
        The column beyond which an argument's help starts on its own line.
    width : int, optional
        The help's width in characters; default the terminal's, less 2.
    """

    def _get_help_string(self, action):
        text, default = action.help or "", action.default
        if (default is None or default is argparse.SUPPRESS or action.nargs == 0 or not action.option_strings
                or "(default" in text):
            return text
        if isinstance(default, (list, tuple)):
            words = action.nargs in ("+", "*") or isinstance(action.nargs, int)
            default = (" " if words else ",").join(map(str, default)) or "none"
        return f"{text} (default: {str(default).replace('%', '%%')})".lstrip()


def _number(kind, text):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None


def positive_int(text):
    """A positive integer, from a flag's text.

    For ``type=`` of an argparse argument.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    int
        The value, at least 1.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer, or not above 0.
    """
    value = _number(int, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def n_train(text):
    """A training-set size: an integer >= 2, from a flag's text.

    For ``type=`` of an argparse argument (``--n-train``).

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    int
        The value, at least 2.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer, or is below 2.
    """
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2, got {value}")
    return value


def nonneg_int(text):
    """An integer >= 0, from a flag's text.

    For ``type=`` of an argparse argument.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    int
        The value, at least 0.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer, or is negative.
    """
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {value}")
    return value


def seed(text):
    """A seed, from a flag's text: an integer in ``[0, 2**31)``.

    For ``type=`` of an argparse argument. The library takes seeds below
    ``2**32`` (:data:`~bnn_zoo.inference.support.seeds.SEED_LIMIT`); a command
    adds a restart's or a member's number to its seed, so the flag stays
    below half of that.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    int
        The seed.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not an integer in that range.
    """
    from bnn_zoo.inference.support.seeds import SEED_LIMIT

    value, limit = _number(int, text), SEED_LIMIT // 2
    if not 0 <= value < limit:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**{limit.bit_length() - 1}), got {value}")
    return value


def positive_float(text):
    """A positive, finite number, from a flag's text.

    For ``type=`` of an argparse argument.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    float
        The value, above 0 and finite.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not a number, or is not above 0, or is infinite or NaN.
    """
    value = _number(float, text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be positive and finite, got {text}")
    return value


def nonneg_float(text):
    """A finite number >= 0, from a flag's text.

    For ``type=`` of an argparse argument.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    float
        The value, at least 0 and finite.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not a number, or is negative, infinite or NaN.
    """
    value = _number(float, text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be >= 0 and finite, got {text}")
    return value


def unit_interval(text):
    """A number in [0, 1), from a flag's text.

    For ``type=`` of an argparse argument.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    float
        The value, at least 0 and below 1.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not a number, or is outside [0, 1).
    """
    value = _number(float, text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def fraction(text):
    """A number in (0, 1], from a flag's text.

    For ``type=`` of an argparse argument.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    float
        The value, above 0 and at most 1.

    Raises
    ------
    argparse.ArgumentTypeError
        If ``text`` is not a number, or is outside (0, 1].
    """
    value = _number(float, text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def names(valid, what: str = "name"):
    """A comma-separated list of distinct names from ``valid``.

    Makes the ``type=`` of an argparse argument that takes names, e.g.
    ``--priors normal,laplace``. Empty items (``"a,,b"``, a trailing comma)
    are dropped.

    Parameters
    ----------
    valid : collection of str
        The names accepted (a tuple, a set or a dict's keys); the error
        lists them, sorted.
    what : str, default "name"
        What a name is, for the error message (``"unknown prior ..."``).

    Returns
    -------
    callable
        A function of the flag's text that returns its names, a list of str
        in the order given, and raises ``argparse.ArgumentTypeError`` for
        an unknown name, an empty list or a repeated name.
    """
    def parse(text):
        items = [n for n in text.split(",") if n]
        unknown = [n for n in items if n not in valid]
        if unknown or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(unknown) or '(empty list)'}; valid: {', '.join(sorted(valid))}")
        if len(set(items)) < len(items):
            raise argparse.ArgumentTypeError(f"repeated {what} in {text!r}")
        return items
    return parse


def int_list(text):
    """Comma-separated positive integers, e.g. ``10,10``.

    For ``type=`` of an argparse argument, such as the hidden layers' widths.

    Parameters
    ----------
    text : str
        The flag's value as typed.

    Returns
    -------
    tuple of int
        The integers, each at least 1, in the order given.

    Raises
    ------
    argparse.ArgumentTypeError
        If an item is not an integer, or is below 1.
    """
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be integers >= 1, got {text!r}")
    return values


def check_writable(path: Path, flag: str) -> None:
    """Check that ``path`` is, or can be created as, a writable folder.

    Looks at ``path``, or else its nearest ancestor that exists: that must
    be a folder this process can create a folder in (tried with a folder
    made and removed at once). Nothing is left behind.

    Parameters
    ----------
    path : pathlib.Path
        The folder an experiment will write to.
    flag : str
        The flag that named it (``"--out"``), for the error message.

    Raises
    ------
    UsageError
        If the nearest existing one of ``path`` and its ancestors is not a
        folder, or is not writable and searchable.
    """
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: {existing} is not a writable folder")
    # Permission bits do not tell everything (root passes them; /proc and read-only mounts refuse
    # anyway): a folder made and removed at once does.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".bnn-zoo-check-", dir=existing))
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot create a folder in {existing} ({err.strerror})") from None
