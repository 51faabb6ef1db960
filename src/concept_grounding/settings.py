"""Settings declared once: a config dataclass field carries its flag, parser, help and manifest key.

A job's configuration is a dataclass; each field a user can set is declared with
:func:`setting`, and everything else is derived from that one declaration:

* the command-line argument (:func:`add_arguments`): flag, ``type=`` validator, default,
  help (argparse shows the default), ``nargs`` / ``choices`` / ``metavar``, and hidden
  deprecated spellings (``aliases``) that still parse;
* the config built back from the parsed arguments (:func:`from_args`);
* how an error raised by the library names the setting when a command runs it
  (:func:`flags`, for :func:`concept_grounding.errors.options_as_flags`);
* the manifest entry a resumable job records (:func:`manifest`);
* the command line that reproduces a config (:func:`command_line`);
* where a Space control starts (:func:`default`).

A field declared with :func:`nested` holds a whole settings config of its own (``CurateConfig``'s
``rules``, ``TrainFluxConfig``'s ``train``): its settings' flags join the command's, and
:func:`from_args` builds the nested config from them. Every flag and destination is one
setting's: :func:`add_arguments` refuses a duplicate, naming both fields.

>>> from dataclasses import dataclass
>>> from concept_grounding.validators import int_at_least, positive_int
>>> @dataclass(frozen=True)
... class RenderConfig:
...     size: int = setting(128, "image side in pixels (>= 32)", parse=int_at_least(32),
...                         aliases=("--image-size",))
...     per_class: int = setting(10, "images per class", parse=positive_int)
...     verbose: bool = False  # not a setting: no flag
>>> import argparse
>>> parser = argparse.ArgumentParser(prog="render")
>>> add_arguments(parser, RenderConfig)
>>> args = parser.parse_args(["--image-size", "64"])
>>> from_args(RenderConfig, args)
RenderConfig(size=64, per_class=10, verbose=False)
>>> flags(RenderConfig)
{'size': '--size', 'per_class': '--per-class'}
>>> manifest(RenderConfig(size=64))
{'size': 64, 'per_class': 10}
>>> command_line(RenderConfig(size=64))
['--size 64', '--per-class 10']
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    #: a config dataclass (the class)
    ConfigClass = type[DataclassInstance]
    #: a config dataclass or one of its instances
    ConfigLike = type[DataclassInstance] | DataclassInstance

ConfigT = TypeVar("ConfigT", bound="DataclassInstance")

__all__ = [
    "Setting",
    "Nested",
    "setting",
    "nested",
    "settings_of",
    "default",
    "add_arguments",
    "add_option",
    "check_unique",
    "from_args",
    "flags",
    "flag",
    "manifest",
    "command_line",
    "tuple_or_none",
]

#: the key of a field's ``metadata`` that holds its :class:`Setting`
METADATA_KEY = "concept_grounding.setting"
#: the key of a field's ``metadata`` that holds its :class:`Nested`
NESTED_KEY = "concept_grounding.nested"
_REQUIRED = dataclasses.MISSING


@dataclass(frozen=True)
class Setting:
    """How one config field appears to the user.

    Attributes:
        name: the field's name (filled in by :func:`settings_of`).
        help: one line for ``--help`` (argparse appends the default).
        parse: ``str -> value`` validator that raises ``argparse.ArgumentTypeError`` with what
            is accepted (:mod:`concept_grounding.validators`); ``None``: the text as it is.
        flag: the command-line spelling; ``None``: ``--`` + the name with ``_`` as ``-``.
        aliases: older spellings that still parse, hidden from ``--help``.
        nargs, choices, metavar: as ``argparse.ArgumentParser.add_argument``.
        action: ``"store_true"`` for a switch that is off by default, ``"store_false"`` for a
            ``--no-x`` switch of a setting that is on by default.
        manifest_key: the key a manifest records the value under; ``None``: the name;
            ``""``: not recorded.
        convert: ``parsed value -> field value`` (e.g. ``tuple`` for ``nargs="*"``).
        switches: older switches (no value) that set the setting to a value, hidden from
            ``--help`` and warning that they are deprecated: ``(("--not-world", None),)`` makes
            ``--not-world`` mean ``--world-seed none``.
    """

    help: str
    parse: Callable[[str], Any] | None = None
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    nargs: str | int | None = None
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None
    action: str | None = None
    manifest_key: str | None = None
    convert: Callable[[Any], Any] | None = None
    switches: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    @property
    def option(self) -> str:
        """The flag, e.g. ``--per-class``."""
        return self.flag or "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Nested:
    """A config field that holds a whole settings config (declared with :func:`nested`).

    Attributes:
        config: the nested config class (its settings become the command's flags).
        given: ``outer config -> fields of the nested one`` that the outer config decides (e.g.
            the training world ``train-flux``'s own settings describe); ``None``: none.
        name: the field's name (filled in by :func:`_nested_of`).
    """

    config: ConfigClass
    given: Callable[[Any], Mapping[str, Any]] | None = None
    name: str = ""


def tuple_or_none(values: Iterable[Any]) -> tuple[Any, ...] | None:
    """The ``convert`` of a ``nargs="*"`` setting whose default is ``None``: the flag given with
    no values means the default too, not an empty selection.

    >>> tuple_or_none(["a", "b"]), tuple_or_none([])
    (('a', 'b'), None)
    """
    return tuple(values) or None


def setting(
    default: Any = _REQUIRED, help: str = "", *, default_factory: Callable[[], Any] | None = None, **spec: Any
) -> Any:
    """A dataclass field declared as a user setting (see :class:`Setting` for ``spec``).

    ``default`` is the field's default (omit it for a required setting; ``default_factory``
    for a mutable one). Returns a :func:`dataclasses.field`.
    """
    metadata = {METADATA_KEY: Setting(help=help, **spec)}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def nested(config: ConfigClass, *, given: Callable[[Any], Mapping[str, Any]] | None = None) -> Any:
    """A dataclass field holding one ``config`` (a settings dataclass whose every setting has a
    default): its settings are the outer config's flags too, and :func:`from_args` builds it from
    them, then with ``given(outer)`` for the fields the outer config decides. Returns a
    :func:`dataclasses.field` whose default is ``config()``.

    >>> @dataclass(frozen=True)
    ... class Rules:
    ...     low: float = setting(0.5, "lowest share kept", parse=float)
    >>> @dataclass(frozen=True)
    ... class Curate:
    ...     seed: int = setting(0, "seed", parse=int)
    ...     rules: Rules = nested(Rules)
    >>> parser = argparse.ArgumentParser(prog="curate")
    >>> add_arguments(parser, Curate)
    >>> from_args(Curate, parser.parse_args(["--low", "0.9"]))
    Curate(seed=0, rules=Rules(low=0.9))
    >>> flags(Curate), manifest(Curate()), command_line(Curate())
    ({'seed': '--seed', 'low': '--low'}, {'seed': 0, 'low': 0.5}, ['--seed 0', '--low 0.5'])
    """
    return dataclasses.field(default_factory=config, metadata={NESTED_KEY: Nested(config, given)})


def settings_of(config: ConfigLike) -> tuple[Setting, ...]:
    """The declared settings of a config class (or instance), in field order, each named (not
    those of its :func:`nested` configs: :func:`flags` lists every flag)."""
    return tuple(
        dataclasses.replace(f.metadata[METADATA_KEY], name=f.name)
        for f in dataclasses.fields(config)
        if METADATA_KEY in f.metadata
    )


def _nested_of(config: ConfigLike) -> tuple[Nested, ...]:
    """The :func:`nested` fields of a config class (or instance), in field order, each named."""
    return tuple(
        dataclasses.replace(f.metadata[NESTED_KEY], name=f.name)
        for f in dataclasses.fields(config)
        if NESTED_KEY in f.metadata
    )


def _leaves(config: ConfigLike) -> list[tuple[ConfigClass, Setting]]:
    """``(owner class, setting)`` of every setting of ``config`` and of its nested configs, depth first
    in field order."""
    cls = config if isinstance(config, type) else type(config)
    found = [(cls, s) for s in settings_of(cls)]
    for n in _nested_of(cls):
        found += _leaves(n.config)
    return found


def _values(config: DataclassInstance) -> dict[str, Any]:
    """Setting name -> value of a config instance and of its nested configs."""
    values = {s.name: getattr(config, s.name) for s in settings_of(config)}
    for n in _nested_of(config):
        values.update(_values(getattr(config, n.name)))
    return values


def check_unique(config: ConfigClass) -> None:
    """Refuse a config whose settings (its own and its nested configs') share a flag, an old
    spelling or a destination: each must name one field.

    Raises:
        TypeError: two settings share one; the message names both fields.
    """
    seen: dict[str, str] = {}
    for owner, s in _leaves(config):
        field = f"{owner.__name__}.{s.name}"
        for key in (s.name, s.option, *s.aliases, *(alias for alias, _ in s.switches)):
            what = "flag" if key.startswith("-") else "name"
            if key in seen:
                raise TypeError(
                    f"settings of {config.__name__}: {field} and {seen[key]} share the {what} {key}; "
                    "rename one of them or give it another flag="
                )
            seen[key] = field


def default(config: ConfigLike, name: str) -> Any:
    """The declared default of one setting, for a control that shows it (the Space's sliders
    and fields start where the command's flags do).

    >>> from concept_grounding.cci.explain_job import ExplainConfig
    >>> default(ExplainConfig, "clusters")
    7

    Raises:
        KeyError: ``name`` is not a declared setting of ``config``, or it has no default.
    """
    if name not in flags(config):
        raise KeyError(f"{name!r} is not a setting of {getattr(config, '__name__', type(config).__name__)}")
    owner = next(cls for cls, s in _leaves(config) if s.name == name)
    value = _default(owner, name)
    if value is _REQUIRED:
        raise KeyError(f"the setting {name!r} has no default")
    return value


def _default(config: ConfigClass, name: str) -> Any:
    field = next(f for f in dataclasses.fields(config) if f.name == name)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return _REQUIRED


def add_arguments(
    parser: argparse.ArgumentParser,
    config: ConfigClass,
    *,
    exclude: Iterable[str] = (),
    defaults: Mapping[str, Any] | DataclassInstance | None = None,
) -> None:
    """Add one argument per declared setting of ``config`` (and of its :func:`nested` configs) to
    ``parser``, after :func:`check_unique`.

    Args:
        exclude: field names the command sets itself (no flag).
        defaults: defaults that differ from the dataclass's (a command whose defaults are
            another job's, e.g. the bench's smaller world): field name -> value, or an instance
            of ``config`` whose values are the defaults.

    Raises:
        TypeError: two settings share a flag or a destination (:func:`check_unique`).
    """
    check_unique(config)
    excluded = set(exclude)
    if defaults is not None and dataclasses.is_dataclass(defaults):
        defaults = {**{f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)}, **_values(defaults)}
    for owner, s in _leaves(config):
        if s.name in excluded:
            continue
        default = (defaults or {}).get(s.name, _default(owner, s.name))
        kwargs: dict[str, Any] = {"dest": s.name, "help": s.help}
        if s.action:
            kwargs["action"] = s.action
        else:
            metavar = s.metavar or (None if s.choices else s.option.lstrip("-").replace("-", "_").upper())
            kwargs.update(
                {
                    k: v
                    for k, v in (("type", s.parse), ("nargs", s.nargs), ("choices", s.choices), ("metavar", metavar))
                    if v is not None
                }
            )
        if default is _REQUIRED:
            kwargs["required"] = True
        elif s.nargs is not None and isinstance(default, tuple):
            kwargs["default"] = list(default)  # as argparse parses several values (``convert`` turns them back)
        else:
            kwargs["default"] = default
        add_option(parser, s.option, *s.aliases, **kwargs)
        for alias, value in s.switches:
            parser.add_argument(
                alias,
                dest=s.name,
                nargs=0,
                action=_deprecated_switch(alias, s.option, value),
                help=argparse.SUPPRESS,
                default=argparse.SUPPRESS,
            )


def add_option(parser: argparse.ArgumentParser, flag: str, *aliases: str, **kwargs: Any) -> None:
    """``parser.add_argument(flag, **kwargs)`` plus older spellings (``aliases``) that parse to
    the same destination and are hidden from ``--help`` (for an option a command declares
    itself rather than through a config's :func:`setting`)."""
    action = parser.add_argument(flag, **kwargs)
    hidden = {**kwargs, "dest": action.dest, "help": argparse.SUPPRESS, "required": False, "default": argparse.SUPPRESS}
    for alias in aliases:
        if action.nargs != 0:  # a value follows: its parse says the spelling is deprecated (FutureWarning)
            hidden["type"] = _deprecated_spelling(alias, flag, kwargs.get("type") or str)
        parser.add_argument(alias, **hidden)


def _deprecated_spelling(alias: str, flag: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` that first warns (``FutureWarning``) that ``alias`` is an old spelling of ``flag``; argparse calls it
    only for a value given on ``alias``."""
    import warnings

    def parse_alias(text: str) -> Any:
        warnings.warn(f"{alias} is a deprecated spelling of {flag}; use {flag}", FutureWarning, stacklevel=2)
        return parse(text)

    parse_alias.__name__ = getattr(parse, "__name__", "value")  # argparse names the type in its errors
    return parse_alias


def _deprecated_switch(alias: str, flag: str, value: Any) -> type[argparse.Action]:
    """The action of an old switch ``alias`` that sets ``flag``'s setting to ``value``, warning
    (``FutureWarning``) that it is deprecated."""
    spelled = "none" if value is None else str(value)

    class DeprecatedSwitch(argparse.Action):
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            import warnings

            warnings.warn(f"{alias} is deprecated; use {flag} {spelled}", FutureWarning, stacklevel=2)
            setattr(namespace, self.dest, value)

    return DeprecatedSwitch


def from_args(config: type[ConfigT], args: argparse.Namespace, **given: Any) -> ConfigT:
    """``config(**values)`` from the parsed ``args`` of :func:`add_arguments`; ``given``
    supplies (or overrides) fields the command computes itself. A :func:`nested` config is built
    from the same ``args`` (then with its ``given(outer)`` fields, on the outer config built)."""
    values: dict[str, Any] = {}
    for s in settings_of(config):
        if s.name in given or not hasattr(args, s.name):
            continue
        value = getattr(args, s.name)
        values[s.name] = s.convert(value) if s.convert is not None and value is not None else value
    later = [n for n in _nested_of(config) if n.name not in given]
    values.update({n.name: from_args(n.config, args) for n in later if n.given is None})
    built = config(**values, **given)
    decided = {n.name: from_args(n.config, args, **n.given(built)) for n in later if n.given is not None}
    return dataclasses.replace(built, **decided) if decided else built


def flags(config: ConfigLike) -> dict[str, str]:
    """Field name -> flag (nested configs' too), for :func:`concept_grounding.errors.options_as_flags`."""
    return {s.name: s.option for _, s in _leaves(config)}


def flag(config: ConfigLike, name: str) -> str:
    """The flag of one setting (``flag(WorldExportConfig, "per_pairing") == "--per-pairing"``).

    Raises:
        KeyError: ``name`` is not a declared setting of ``config``.
    """
    return flags(config)[name]


def manifest(config: DataclassInstance) -> dict[str, Any]:
    """Manifest key -> value of every recorded setting of a config instance (a nested config's
    settings as keys of their own, as if declared by the outer config)."""
    recorded = {s.manifest_key or s.name: getattr(config, s.name) for s in settings_of(config) if s.manifest_key != ""}
    for n in _nested_of(config):
        recorded.update(manifest(getattr(config, n.name)))
    return recorded


def command_line(config: DataclassInstance) -> list[str]:
    """``--flag value`` of every setting of a config instance that has a value (``--flag none``
    for ``None`` where the default is not; a switch only when it differs from its off state; ``nargs``
    values joined by spaces), in declaration order, then each nested config's)."""
    parts: list[str] = []
    for s in settings_of(config):
        value = getattr(config, s.name)
        if s.action:
            if value is (s.action == "store_true"):
                parts.append(s.option)
        elif value is None:
            if _default(type(config), s.name) not in (None, _REQUIRED):  # an optional setting set to none
                parts.append(f"{s.option} none")
        elif s.nargs is not None and not isinstance(value, str):
            parts.append(" ".join([s.option, *map(str, value)]))
        else:
            parts.append(f"{s.option} {value}")
    for n in _nested_of(config):
        parts += command_line(getattr(config, n.name))
    return parts
