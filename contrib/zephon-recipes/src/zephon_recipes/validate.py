"""Checking a recipe before anything runs, and turning it into the calls that build the pipeline.

Every check reads what the installed plugins registered (operator, reader and runner names, and
each factory's signature and annotations, see :mod:`zephon_recipes.signatures`), so an operator a
third-party plugin registers is checked exactly like the kernel's. Problems are collected rather
than raised one by one, so a user fixes a recipe in one pass; each names the file, line and key.
Nothing here builds a dataset reader, a work source or a pipeline: it only looks at the file
system (paths exist, a reader's detector recognises them).
"""

from __future__ import annotations

import difflib
import glob
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zephon_curricula import ScheduledMixtureWorkSource

from zephon_core import Pipeline, StaticMixtureWorkSource, ZephonError
from zephon_core.hookspecs import Kind
from zephon_core.plugin_api import ZephonPluginManager
from zephon_recipes import signatures as sig
from zephon_recipes.document import COMMAND_LINE, Document, Key, RecipeError, dotted
from zephon_recipes.materialized import is_materialized, read_manifest

SECTIONS = ("description", "datasets", "mixture", "fetch", "operators", "batch", "options", "world_sizes")
"""The top-level keys of a recipe (besides ``include`` and ``set``, which reading resolves)."""

DATASET_KEYS = ("path", "format", "options")
MIXTURE_KEYS = ("weights", "ratios", "schedule")
SCHEDULE_KEYS = ("unit", "interpolate", "breakpoints")
WEIGHT_TOLERANCE = 1e-6


def closest(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass
class DatasetPlan:
    """One dataset, ready for ``Dataset.from_path``."""

    name: str
    path: str
    format: str
    options: dict[str, Any]


@dataclass
class StepPlan:
    """One operator step: its registered name and keyword arguments (references loaded)."""

    operator: str
    kwargs: dict[str, Any]
    package: str = ""


@dataclass
class Plan:
    """A validated recipe as the calls that build its pipeline."""

    datasets: list[DatasetPlan] = field(default_factory=list)
    source: type = StaticMixtureWorkSource
    weights: dict[str, float] | None = None
    ratios: bool = False
    schedule: dict[str, Any] | None = None
    source_kwargs: dict[str, Any] = field(default_factory=dict)
    fetch: dict[str, Any] = field(default_factory=dict)
    steps: list[StepPlan] = field(default_factory=list)
    batch: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    world_sizes: list[int] = field(default_factory=list)
    materialized: str | None = None
    """A folder ``zephon materialize`` wrote, when that is the recipe's dataset (its source replays it)."""


class Checker:
    """Validates one :class:`~zephon_recipes.document.Document` against one plugin manager."""

    def __init__(self, doc: Document, plugins: ZephonPluginManager) -> None:
        self.doc = doc
        self.plugins = plugins
        self.problems: list[str] = []
        self.plan = Plan()
        self.manifest: dict[str, Any] = {}

    # -- reporting ------------------------------------------------------------------------------
    def problem(self, key: Key, message: str) -> None:
        self.problems.append(f"{self.doc.where(key)}: {message}")

    def _mapping(self, key: Key, value: Any, what: str) -> dict[str, Any] | None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(key, f"{what} must be a mapping, got {type(value).__name__} {value!r}")
            return None
        return value

    # -- arguments ------------------------------------------------------------------------------
    def arguments(
        self, key: Key, given: dict[str, Any], acc: sig.Accepts, owner: str, *, check_required: bool = True
    ) -> dict[str, Any]:
        """Check keyword arguments against what a factory accepts; return them ready to pass."""
        out: dict[str, Any] = {}
        suggested: set[str] = set()  # a misspelled required argument is reported once, as misspelled
        for name, value in given.items():
            here = (*key, name)
            param = acc.params.get(name)
            if param is None:
                if acc.open:
                    out[name] = value
                    continue
                valid = sorted(acc.params)
                suggested.update(difflib.get_close_matches(name, valid, n=1))
                noun = "option" if owner == "options" else "argument"
                self.problem(
                    here, f"{owner} has no {noun} {name!r}{closest(name, valid)}; its {noun}s: {', '.join(valid)}"
                )
                continue
            out[name] = self.value(here, value, param, owner)
        if check_required:
            for p in acc.params.values():
                if p.required and p.name not in given and p.name not in suggested:
                    self.problem(key, f"{owner} needs the argument {p.name!r} ({p.text})")
        return out

    def value(self, key: Key, value: Any, param: sig.Param, owner: str) -> Any:
        """One argument: a ``"module:attr"`` reference loaded where the parameter wants an object, then type-checked."""
        tp = param.annotation
        if sig.wants_object(tp) and isinstance(value, str):
            if not sig.is_reference(value):
                self.problem(
                    key, f"{owner}: {param.name} takes a Python object: write it as 'module:attr', got {value!r}"
                )
                return value
            try:
                value = sig.load_reference(value)
            except ZephonError as exc:
                self.problem(key, f"{owner}: {param.name}: {exc}")
                return value
        if not sig.conforms(value, tp):
            self.problem(key, f"{owner}: {param.name} must be {param.text}, got {type(value).__name__} {value!r}")
            return value
        return sig.coerce(value, tp)

    def provider(self, kind: Kind, name: str) -> str:
        """``"; it is provided by the distribution ...: install it with ..."`` for a first-party name
        this manager lacks (the kernel's registry knows them), else ``""``."""
        try:
            self.plugins.registry.get(kind, name)
        except ZephonError as exc:
            _, found, hint = str(exc).partition("; it is provided by")
            return f"; it is provided by{hint}" if found else ""
        return ""

    def runner(self, key: Key, value: Any) -> None:
        names = self.plugins.registry.names("runner")
        if isinstance(value, str) and value not in names:
            extra = self.provider("runner", value) or closest(value, names)
            self.problem(key, f"no runner {value!r} is installed (installed: {', '.join(names)}){extra}")

    # -- sections -------------------------------------------------------------------------------
    def run(self) -> Plan:
        data = self.doc.data
        for k in data:
            if k not in SECTIONS:
                self.problem(
                    (k,), f"unknown section{closest(k, SECTIONS)}; a recipe has: {', '.join(SECTIONS)}, include, set"
                )
        if "datasets" not in data:
            self.problem((), "the recipe needs a 'datasets' section")
        self.datasets(data.get("datasets"))
        self.mixture(data.get("mixture"))
        self.fetch(data.get("fetch"))
        self.operators(data.get("operators"))
        self.batch(data.get("batch"))
        self.options(data.get("options"))
        self.world_sizes(data.get("world_sizes"))
        if self.plan.materialized is not None:
            self.read_back(data)
        if self.problems:
            raise RecipeError(self.problems)
        return self.plan

    def datasets(self, raw: Any) -> None:
        section = self._mapping(("datasets",), raw, "datasets")
        if section is None:
            return
        if not section and raw is not None:
            self.problem(("datasets",), "needs at least one dataset")
        readers = self.plugins.registry.names("reader")
        for name, entry in section.items():
            key: Key = ("datasets", name)
            if isinstance(entry, str):
                entry = {"path": entry}
            spec = self._mapping(key, entry, f"dataset {name!r}")
            if spec is None:
                continue
            for k in spec:
                if k not in DATASET_KEYS:
                    self.problem(
                        (*key, k),
                        f"unknown dataset key{closest(k, DATASET_KEYS)}; a dataset has: {', '.join(DATASET_KEYS)}",
                    )
            path = spec.get("path")
            if not isinstance(path, str) or not path:
                self.problem(
                    (*key, "path") if "path" in spec else key,
                    f"dataset {name!r} needs a 'path' (a folder, file, glob or URL)",
                )
                continue
            resolved = self.path((*key, "path"), path)
            if resolved is not None and is_materialized(resolved):
                self.materialized(key, resolved, spec, section)
                continue
            fmt = spec.get("format")
            if fmt is not None and (not isinstance(fmt, str) or fmt not in readers):
                extra = self.provider("reader", str(fmt)) or closest(str(fmt), readers)
                self.problem(
                    (*key, "format"),
                    f"no installed reader handles the format {fmt!r} (installed: {', '.join(readers)}){extra}",
                )
                fmt = None
                resolved = None
            options = self._mapping((*key, "options"), spec.get("options"), f"dataset {name!r} options") or {}
            if resolved is None:
                continue
            if fmt is None:
                try:
                    fmt = self.plugins.registry.detect_format(resolved, options.get("storage_options"))
                except ZephonError as exc:
                    self.problem((*key, "path"), f"no installed reader recognises this dataset: {exc}")
                    continue
            reader = self.plugins.registry.get("reader", fmt).load()
            kwargs = self.arguments((*key, "options"), options, sig.accepts(reader, skip=1), f"reader {fmt!r}")
            self.plan.datasets.append(DatasetPlan(name, resolved, fmt, kwargs))

    def materialized(self, key: Key, resolved: str, spec: dict[str, Any], section: dict[str, Any]) -> None:
        """A dataset that is a materialised prefix: it must be the only dataset, in the written format;
        its records, chunks and mixture are replayed (see :mod:`zephon_recipes.materialize`)."""
        try:
            manifest = read_manifest(resolved)
        except ZephonError as exc:
            self.problem((*key, "path"), str(exc))
            return
        fmt = spec.get("format")
        if fmt is not None and fmt != manifest["format"]:
            self.problem((*key, "format"), f"this materialised folder holds {manifest['format']!r} files, not {fmt!r}")
        if spec.get("options"):
            self.problem(
                (*key, "options"), "a materialised folder is read as it was written: it takes no reader options"
            )
        if len(section) > 1:
            self.problem(
                ("datasets",),
                "a materialised folder replays the whole prefix (its datasets and mixture): it must be the only dataset",
            )
        self.plan.materialized = resolved
        self.manifest = manifest

    def path(self, key: Key, path: str) -> str | None:
        """The dataset path with ``$VARS`` and ``~`` expanded, relative to the file that wrote it; None if missing."""
        expanded = os.path.expanduser(os.path.expandvars(path))
        if "$" in expanded:
            self.problem(key, f"{path!r}: an environment variable in it is not set")
            return None
        if "://" in expanded and not expanded.startswith("file://"):
            return expanded  # a remote URL: the reader checks it when the pipeline is built
        local = expanded.removeprefix("file://")
        loc = self.doc.loc(key)
        if not os.path.isabs(local) and not loc.file.startswith(COMMAND_LINE):
            local = os.path.normpath(Path(loc.file).parent / local)
        if glob.has_magic(local):
            matches = sorted(glob.glob(local))
            if not matches:
                self.problem(key, f"{path!r}: no path matches this glob")
                return None
            if len(matches) > 1:
                self.problem(
                    key,
                    f"{path!r}: the glob matches {len(matches)} paths ({', '.join(matches[:3])}, ...); a dataset reads one folder: make the glob match it",
                )
                return None
            local = matches[0]
        if not os.path.exists(local):
            self.problem(key, f"the dataset path {path!r} does not exist (looked for {local})")
            return None
        return local

    def read_back(self, data: dict[str, Any]) -> None:
        """What reading a materialised prefix back needs: no mixture of its own, the written lane count."""
        if data.get("mixture"):
            self.problem(
                ("mixture",),
                "the dataset is a materialised prefix, which replays its own mixture and order: remove the mixture section",
            )
        want = int(self.manifest["lanes"])
        lanes = self.plan.options.get("lanes", 1)
        if lanes != want:
            where: Key = ("options", "lanes") if ("options", "lanes") in self.doc.locs else ("options",)
            self.problem(
                where,
                f"the materialised prefix was written for {want} lanes, this recipe has {lanes}: each lane's records, "
                f"windows and randomness depend on the lane count; set options.lanes: {want}",
            )
        if self.plan.options.get("lane_assignment", "modulo") != "modulo":
            self.problem(
                ("options", "lane_assignment"), "a materialised prefix is read back with lane_assignment 'modulo'"
            )

    def mixture(self, raw: Any) -> None:
        section = self._mapping(("mixture",), raw, "mixture")
        if section is None:
            return
        scheduled = "schedule" in section
        if scheduled and "weights" in section:
            self.problem(("mixture", "schedule"), "give either weights (a static mixture) or a schedule, not both")
        self.plan.source = ScheduledMixtureWorkSource if scheduled else StaticMixtureWorkSource
        acc = sig.accepts(self.plan.source, exclude=("datasets", "mixture", "schedule"))
        acc.params = {k: v for k, v in acc.params.items() if k not in MIXTURE_KEYS}
        rest = {k: v for k, v in section.items() if k not in MIXTURE_KEYS}
        extra = sig.Accepts(dict(acc.params), acc.open)
        for k in MIXTURE_KEYS:
            extra.params.setdefault(k, sig.Param(k, False, sig.UNKNOWN, "see the docs"))
        for k in rest:
            if k not in acc.params:
                valid = sorted(extra.params)
                self.problem(
                    ("mixture", k),
                    f"the mixture has no setting {k!r}{closest(k, valid)}; its settings: {', '.join(valid)}",
                )
        self.plan.source_kwargs = self.arguments(
            ("mixture",), {k: v for k, v in rest.items() if k in acc.params}, acc, "mixture"
        )
        ratios = section.get("ratios", False)
        if not isinstance(ratios, bool):
            self.problem(("mixture", "ratios"), f"must be true or false, got {ratios!r}")
            ratios = False
        self.plan.ratios = ratios
        names = (
            [d for d in (self.doc.data.get("datasets") or {})]
            if isinstance(self.doc.data.get("datasets"), dict)
            else []
        )
        if "weights" in section:
            self.plan.weights = self.weights(("mixture", "weights"), section["weights"], names, ratios)
        if scheduled:
            self.schedule(section["schedule"], names, ratios)

    def weights(self, key: Key, raw: Any, names: list[str], ratios: bool) -> dict[str, float] | None:
        weights = self._mapping(key, raw, "weights")
        if weights is None:
            return None
        ok = True
        for name, w in weights.items():
            if name not in names:
                self.problem(
                    (*key, name),
                    f"weight for a dataset the recipe does not define{closest(name, names)} (datasets: {', '.join(names)})",
                )
                ok = False
            elif isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0 or math.isinf(w):
                self.problem((*key, name), f"a weight must be a positive number, got {w!r}")
                ok = False
        missing = [n for n in names if n not in weights]
        if missing:
            self.problem(
                key, f"no weight for dataset(s) {', '.join(missing)} (leave a dataset out of the recipe instead)"
            )
            ok = False
        if ok and not ratios:
            total = sum(float(w) for w in weights.values())
            if abs(total - 1.0) > WEIGHT_TOLERANCE:
                shares = ", ".join(f"{n} {float(w) / total:.4g}" for n, w in weights.items())
                # point at a weight set elsewhere (an override) if there is one: that is what changed
                base = self.doc.loc(key).file
                moved = [(*key, n) for n in weights if self.doc.loc((*key, n)).file != base]
                self.problem(
                    moved[0] if moved else key,
                    f"the weights sum to {total:.6g}, not 1 (as shares: {shares}); fix them, or set mixture.ratios: true if they are ratios on purpose",
                )
                ok = False
        return {n: float(w) for n, w in weights.items()} if ok else None

    def schedule(self, raw: Any, names: list[str], ratios: bool) -> None:
        key: Key = ("mixture", "schedule")
        spec = self._mapping(key, raw, "schedule")
        if spec is None:
            return
        for k in spec:
            if k not in SCHEDULE_KEYS:
                self.problem(
                    (*key, k),
                    f"unknown schedule key{closest(k, SCHEDULE_KEYS)}; a schedule has: {', '.join(SCHEDULE_KEYS)}",
                )
        points = spec.get("breakpoints")
        if not isinstance(points, list) or not points:
            self.problem((*key, "breakpoints"), "a non-empty list of {at: POSITION, weights: {dataset: weight}}")
            return
        out = []
        for i, point in enumerate(points):
            here: Key = (*key, "breakpoints", i)
            if not isinstance(point, dict) or set(point) != {"at", "weights"}:
                self.problem(here, f"a breakpoint is {{at: POSITION, weights: {{...}}}}, got {point!r}")
                continue
            w = self.weights((*here, "weights"), point["weights"], names, ratios)
            if w is not None:
                out.append((point["at"], w))
        self.plan.schedule = {
            "breakpoints": out,
            "unit": spec.get("unit", "samples"),
            "interpolate": spec.get("interpolate", "step"),
        }

    def fetch(self, raw: Any) -> None:
        section = self._mapping(("fetch",), raw, "fetch")
        if section is None:
            return
        self.plan.fetch = self.arguments(("fetch",), section, sig.accepts(Pipeline.fetch, skip=1), "fetch")
        if "runner" in section:
            self.runner(("fetch", "runner"), section["runner"])

    def operators(self, raw: Any) -> None:
        if raw is None:
            return
        if not isinstance(raw, list):
            self.problem(("operators",), f"must be a list of steps (- name: {{arguments}}), got {type(raw).__name__}")
            return
        registry = self.plugins.registry
        installed = registry.names("operator")
        for i, entry in enumerate(raw):
            key: Key = ("operators", i)
            if isinstance(entry, str):
                entry = {entry: {}}
            if not isinstance(entry, dict) or len(entry) != 1:
                self.problem(
                    key,
                    f"a step is one operator name with its arguments (- tokenize: {{tokenizer_id: gpt2}}), got {entry!r}",
                )
                continue
            name, args = next(iter(entry.items()))
            here: Key = (*key, name)
            if name not in installed:
                self.problem(here, self.unknown_operator(name, installed))
                continue
            given = self._mapping(here, args, f"the arguments of {name!r}")
            if given is None:
                continue
            reg = registry.get("operator", name)
            try:
                factory = reg.load()
            except ZephonError as exc:
                self.problem(here, str(exc))
                continue
            kwargs = self.arguments(here, given, sig.accepts(factory), f"operator {name!r} ({reg.package})")
            if "runner" in given:
                self.runner((*here, "runner"), given["runner"])
            self.plan.steps.append(StepPlan(name, kwargs, reg.package))

    def unknown_operator(self, name: str, installed: list[str]) -> str:
        """Which package provides ``name``: a first-party one to install, one installed but not in this
        plugin manager, or else the closest installed name."""
        msg = f"no operator {name!r} is installed"
        provider = self.provider("operator", name)
        if provider:
            return f"{msg}{provider}"
        try:
            from zephon_core.plugin_api import default_plugin_manager

            everywhere = default_plugin_manager().registry
            if name in everywhere.names("operator"):
                reg = everywhere.get("operator", name)
                return f"{msg} in this plugin manager; the installed package {reg.package} {reg.version} provides it"
        except ZephonError:
            pass
        return f"{msg}{closest(name, installed)} (installed: {', '.join(installed)})"

    def batch(self, raw: Any) -> None:
        if raw is None:
            self.problem((), "the recipe needs a 'batch' section (batch: {microbatch_size: N})")
            return
        section = self._mapping(("batch",), raw, "batch")
        if section is None:
            return
        self.plan.batch = self.arguments(("batch",), section, sig.accepts(Pipeline.batch, skip=1), "batch")
        if "runner" in section:
            self.runner(("batch", "runner"), section["runner"])

    def options(self, raw: Any) -> None:
        section = self._mapping(("options",), raw, "options")
        if section is None:
            return
        acc = sig.accepts(Pipeline.options, skip=1)
        self.plan.options = self.arguments(("options",), section, acc, "options")
        if "runner" in section:
            self.runner(("options", "runner"), section["runner"])

    def world_sizes(self, raw: Any) -> None:
        if raw is None:
            return
        key: Key = ("world_sizes",)
        if not isinstance(raw, list) or not all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in raw):
            self.problem(
                key, f"a list of the data-parallel world sizes this recipe will run on (ints >= 1), got {raw!r}"
            )
            return
        self.plan.world_sizes = list(raw)
        lanes = self.plan.options.get("lanes", 1)
        if not isinstance(lanes, int):
            return
        bad = [w for w in raw if lanes % w]
        if bad:
            need = math.lcm(*raw)
            where: Key = ("options", "lanes") if ("options", "lanes") in self.doc.locs else key
            self.problem(
                where,
                f"lanes {lanes} cannot be split evenly over world size(s) {', '.join(map(str, bad))} "
                f"(world_sizes: {raw}); use a multiple of {need}, e.g. lanes: {-(-lanes // need) * need}",
            )


def check(doc: Document, plugins: ZephonPluginManager) -> Plan:
    """Validate ``doc`` and return the calls that build its pipeline.

    Raises:
        RecipeError: every problem found, one line each (``file:line: key: message``).
    """
    return Checker(doc, plugins).run()


__all__ = ["Plan", "RecipeError", "check", "dotted"]
