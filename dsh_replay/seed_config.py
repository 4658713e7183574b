"""Adapter plugins configured by a YAML file shaped like the seed's ``cordis.yml``.

A plugin is a module exporting the seed's four pieces:

- ``name``: the plugin's name, used in messages;
- ``Config``: a dataclass; each YAML key (``apiKey``) maps to a snake_case field
  (``api_key``); a field without default is required, and a required list must
  not be empty;
- ``inject = ["llm"]``: the services ``apply`` needs;
- ``apply(ctx, config)``: called once with the validated config, typically
  ``ctx.llm.register_adapter(config.providers, MyAdapter(config.api_key))``.

The YAML names each plugin by its import path (relative to the YAML file's
folder or ``sys.path``); ``module:label`` loads one module several times, and
a leading ``~`` disables an entry, as in cordis::

    plugins:
      my_llm_adapter:
        apiKey: ${MY_PROVIDER_API_KEY}
        providers: [my-provider, my-provider-backup]

Configuration errors surface at load time as one-line ``ConfigError``, naming the
YAML file, the plugin and the field; a ``${`` that is not a well-formed placeholder is
one of them, never passed on as a literal.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .protocol.adapter import LlmRegistry

__all__ = ["PluginContext", "load_plugins"]


@dataclass(slots=True)
class PluginContext:
    """What ``apply(ctx, config)`` receives: the services a plugin may ``inject``."""

    llm: LlmRegistry

    SERVICES = ("llm",)


#: every ``${``, closed or not: a typo in a placeholder must not reach a provider as a literal key
_ENV_REF = re.compile(r"\$\{(?P<body>[^}]*)(?P<end>\}?)")
_ENV_BODY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.DOTALL)


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _expand_str(value: str, plugin: str, key: str, environ: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        ref = _ENV_BODY.fullmatch(match["body"]) if match["end"] else None
        if ref is None:
            problem = "does not name a variable" if match["end"] else "is not closed"
            raise ConfigError(
                f"plugin {plugin!r}: field {key!r}: placeholder {match[0]!r} in {value!r} {problem}; "
                "write ${NAME} or ${NAME:-default}, NAME made of letters, digits and _"
            )
        name, default = ref["name"], ref["default"]
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConfigError(
            f"plugin {plugin!r}: field {key!r} refers to ${{{name}}}, which is not set; "
            f"export {name} or write ${{{name}:-default}}"
        )

    return _ENV_REF.sub(substitute, value)


def _expand(value: Any, plugin: str, key: str, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _expand_str(value, plugin, key, environ)
    if isinstance(value, list):
        return [_expand(item, plugin, key, environ) for item in value]
    if isinstance(value, dict):
        return {k: _expand(v, plugin, f"{key}.{k}", environ) for k, v in value.items()}
    return value


def _type_name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind).replace("typing.", "")


def _check_type(value: Any, kind: Any, plugin: str, key: str) -> None:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        arms = typing.get_args(kind)
        if value is None and type(None) in arms:
            return
        for arm in arms:
            try:
                _check_type(value, arm, plugin, key)
            except ConfigError:
                continue
            return
        raise ConfigError(f"plugin {plugin!r}: field {key!r} must be {_type_name(kind)}; got {value!r}")
    if origin in (list, tuple, Sequence) or kind in (list, tuple):
        if not isinstance(value, list):
            given = "a string" if isinstance(value, str) else type(value).__name__
            raise ConfigError(
                f"plugin {plugin!r}: field {key!r} must be a list; got {given} ({value!r}). "
                f"Write it as a YAML list, e.g. {key}: [{value!r}]"
            )
        (item_kind, *_) = typing.get_args(kind) or (Any,)
        for position, item in enumerate(value):
            _check_type(item, item_kind, plugin, f"{key}[{position}]")
        return
    if kind is Any:
        return
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return
    if isinstance(kind, type) and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise ConfigError(
            f"plugin {plugin!r}: field {key!r} must be {_type_name(kind)}; got {type(value).__name__} ({value!r})"
        )


def _build_config(module: types.ModuleType, plugin: str, raw: Any, environ: Mapping[str, str]) -> Any:
    config_cls = module.Config
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"plugin {plugin!r}: its config must be a mapping of fields; got {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    hints = typing.get_type_hints(config_cls)
    by_key: dict[str, str] = {}
    for key in raw:
        name = _snake(str(key))
        if name not in fields:
            known = ", ".join(sorted(_camel(n) for n in fields))
            raise ConfigError(f"plugin {plugin!r}: unknown field {key!r}; known fields: {known}")
        by_key[name] = str(key)
    values: dict[str, Any] = {}
    for name, spec in fields.items():
        key = by_key.get(name, _camel(name))
        required = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
        if key not in raw:
            if required:
                raise ConfigError(f"plugin {plugin!r}: field {key!r} is required")
            continue
        value = _expand(raw[key], plugin, key, environ)
        _check_type(value, hints[name], plugin, key)
        if required and value in ("", []):
            raise ConfigError(f"plugin {plugin!r}: field {key!r} must not be empty")
        values[name] = value
    return config_cls(**values)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def read_config_text(path: Path, label: str) -> str:
    """The UTF-8 text of a configuration file; a one-line ``ConfigError`` naming it as ``label`` otherwise."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{label} is not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}; save it as UTF-8"
        ) from None


def import_config_module(name: str, where: str) -> types.ModuleType:
    """Import a module named by configuration; ``where`` (e.g. "plugin 'x'") starts the error message.

    ``ImportError`` is left to the caller, which knows where the module was looked for. A module whose
    own code fails (``SyntaxError``, ``RuntimeError``...) is a one-line ``ConfigError``; only
    ``Exception`` is caught, so ``KeyboardInterrupt`` and ``SystemExit`` still stop the run.
    """
    if not name or name.startswith("."):
        raise ConfigError(
            f"{where}: {name!r} is not an absolute module path; write it as a dotted import path "
            "(package.module), with no leading '.' and no file path"
        )
    try:
        return importlib.import_module(name)
    except ImportError:
        raise
    except Exception as exc:
        raise ConfigError(f"{where}: importing {name} failed: {type(exc).__name__}: {exc}") from exc


def _import(module_path: str, folder: Path) -> types.ModuleType:
    added = str(folder) not in sys.path
    if added:
        sys.path.insert(0, str(folder))
    try:
        return import_config_module(module_path, f"plugin {module_path!r}")
    except ImportError as exc:
        raise ConfigError(
            f"plugin {module_path!r}: cannot import it ({exc}); the key must be an importable "
            f"module path, relative to {folder} or sys.path"
        ) from None
    finally:
        if added:
            sys.path.remove(str(folder))


def _check_exports(module: types.ModuleType, plugin: str, ctx: PluginContext) -> None:
    missing = [name for name in ("name", "Config", "inject", "apply") if not hasattr(module, name)]
    if missing:
        raise ConfigError(
            f"plugin {plugin!r}: module {module.__name__} lacks {', '.join(missing)}; "
            "a plugin exports name, Config, inject and apply"
        )
    if not dataclasses.is_dataclass(module.Config):
        raise ConfigError(f"plugin {plugin!r}: Config must be a dataclass")
    inject = module.inject
    if isinstance(inject, str) or not isinstance(inject, (list, tuple)):
        raise ConfigError(f"plugin {plugin!r}: inject must be a list of service names, e.g. ['llm']")
    unknown = [service for service in inject if service not in ctx.SERVICES]
    if unknown:
        raise ConfigError(
            f"plugin {plugin!r}: inject names {', '.join(map(repr, unknown))}, which this context "
            f"does not provide; available services: {', '.join(ctx.SERVICES)}"
        )


def _parse_yaml(text: str, path: Path) -> Any:
    """The document in ``text``; invalid YAML is one line naming ``path``, the line and the column."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line, mark.column) if mark else (0, 0)
        problem = exc.problem or exc.context
    except yaml.reader.ReaderError as exc:  # a control character, refused before parsing starts
        line = text.count("\n", 0, exc.position)
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1)
        problem = f"character #x{exc.character:04x}: {exc.reason}"
    raise ConfigError(f"{path} is not valid YAML (line {line + 1}, column {column + 1}): {problem}")


def _read_entries(path: Path) -> dict[Any, Any]:
    document = _parse_yaml(read_config_text(path, f"plugin config {path}"), path)
    entries = document.get("plugins") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise ConfigError(f"{path}: expected a top-level 'plugins:' mapping of plugin -> config")
    return entries


def _stage(
    entry: str, raw: Any, folder: Path, ctx: PluginContext, environ: Mapping[str, str]
) -> tuple[types.ModuleType, Any, str]:
    """Import one plugin and validate its config, without applying it."""
    module = _import(entry.split(":", 1)[0], folder)
    plugin = str(getattr(module, "name", entry))
    _check_exports(module, plugin, ctx)
    return module, _build_config(module, plugin, raw, environ), plugin


def _apply(module: types.ModuleType, ctx: PluginContext, config: Any, plugin: str) -> None:
    try:
        module.apply(ctx, config)
    except ConfigError as exc:
        raise ConfigError(f"plugin {plugin!r}: {exc}") from None
    except Exception as exc:
        raise ConfigError(f"plugin {plugin!r}: apply failed: {type(exc).__name__}: {exc}") from exc


def load_plugins(
    config_file: str | os.PathLike[str],
    *,
    registry: LlmRegistry | None = None,
    environ: Mapping[str, str] | None = None,
) -> PluginContext:
    """Load, validate and apply every plugin listed in ``config_file``.

    Returns the context whose ``llm`` registry the plugins registered into. Every error is a
    ``ConfigError`` naming the file and, past the document's shape, the plugin.
    """
    if registry is not None and not isinstance(registry, LlmRegistry):
        raise ConfigError(f"load_plugins: registry must be an LlmRegistry or None, got {registry!r}")
    if environ is not None and not (
        isinstance(environ, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in environ.items())
    ):
        raise ConfigError("load_plugins: environ must be a mapping of variable names to str values (like os.environ)")
    path = Path(config_file)
    entries = _read_entries(path)
    environ = os.environ if environ is None else environ
    ctx = PluginContext(llm=registry if registry is not None else LlmRegistry())
    try:
        staged = [
            _stage(str(entry), raw, path.parent.resolve(), ctx, environ)
            for entry, raw in entries.items()
            if not str(entry).startswith("~")
        ]
        # every config is validated before any apply runs, and an apply that fails
        # takes back the routes bound before it: a bad entry changes nothing
        with ctx.llm.all_or_nothing():
            for module, config, plugin in staged:
                _apply(module, ctx, config, plugin)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc.__cause__
    return ctx
