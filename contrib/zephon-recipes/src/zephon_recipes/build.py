"""Building the pipeline a validated recipe describes, through the same calls a Python user writes.

Each step is the builder method of its name (``pipeline.tokenize(**arguments)``, the kernel's own
``pipeline.shuffle(...)``), so a recipe and the Python pipeline it replaces record the same
definition and produce the same global batches.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zephon_curricula import MixtureSchedule

from zephon_core import Dataset, MixtureSpec, Pipeline, ZephonError
from zephon_core.plugin_api import ZephonPluginManager, default_plugin_manager
from zephon_recipes.document import Document, RecipeError, load_document
from zephon_recipes.identity import RECIPE_LABEL, data_form, record_in_manifest
from zephon_recipes.validate import Plan, check


@dataclass
class Recipe:
    """A read and validated recipe: the merged document (with key locations) and its plan."""

    doc: Document
    plan: Plan
    plugins: ZephonPluginManager

    @property
    def data(self) -> dict[str, Any]:
        """The recipe after includes and overrides: its normalised form."""
        return self.doc.data

    @property
    def identity(self) -> dict[str, Any]:
        """The recipe's data-changing form: what its pipeline's checkpoints record (see :mod:`zephon_recipes.identity`)."""
        return data_form(self.doc.data)

    def build(self) -> Pipeline:
        """A new pipeline for this recipe (one per run: pipelines are not reused).

        It carries the recipe's data form as its identity label ``recipe``, so its checkpoints name
        the recipe keys an edited recipe changed; with ``options.manifest`` set, ``recipe.json`` is
        written beside the provenance manifest.
        """
        pipeline = build(self.plan, self.plugins, self.doc.files[-1] if self.doc.files else "recipe")
        form = self.identity
        pipeline.label(**{RECIPE_LABEL: form})
        if pipeline.run_options.manifest is not None:
            record_in_manifest(pipeline.run_options.manifest, form)
        return pipeline


def read_recipe(
    path: str | os.PathLike[str],
    overrides: Iterable[str] | Mapping[str, Any] = (),
    *,
    plugins: ZephonPluginManager | None = None,
) -> Recipe:
    """Read and validate a recipe (no pipeline is built).

    Raises:
        RecipeError: the file cannot be read, or it does not validate (every problem, one per line).
    """
    pm = plugins if plugins is not None else default_plugin_manager()
    doc = load_document(path, overrides)
    return Recipe(doc, check(doc, pm), pm)


def load_recipe(
    path: str | os.PathLike[str],
    overrides: Iterable[str] | Mapping[str, Any] = (),
    *,
    plugins: ZephonPluginManager | None = None,
) -> Pipeline:
    """The pipeline a recipe file (YAML or TOML) describes, validated before anything is built.

    Args:
        path: the recipe file.
        overrides: ``"dotted.key=value"`` strings, as ``--set`` takes them
            (``"mixture.weights.web=0.6"``), or a mapping of dotted keys to values.
        plugins: the plugin manager to take operators, readers and runners from (default: every
            installed plugin).

    Raises:
        RecipeError: the recipe is invalid; each line names the file, line and key.
    """
    return read_recipe(path, overrides, plugins=plugins).build()


def _add_step(pipeline: Pipeline, operator: str, kwargs: dict[str, Any]) -> Pipeline:
    """``pipeline.<operator>(**kwargs)``, the call a Python user writes; ``apply`` when the kernel's own
    builder method of that name spells out fewer arguments than the operator takes (``shuffle``
    has no ``runner``), so every argument of the operator's signature is usable in a recipe."""
    own = getattr(Pipeline, operator, None) if operator in vars(Pipeline) else None
    if own is not None:
        try:
            inspect.signature(own).bind(pipeline, **kwargs)
        except TypeError:
            return pipeline.apply(operator, **kwargs)
    result: Pipeline = getattr(pipeline, operator)(**kwargs)
    return result


def build(plan: Plan, plugins: ZephonPluginManager, where: str) -> Pipeline:
    """Build the pipeline of a validated plan."""
    try:
        datasets = [Dataset.from_path(d.name, d.path, d.format, plugins=plugins, **d.options) for d in plan.datasets]
        source: Any
        if plan.materialized is not None:
            from zephon_recipes.materialized import MaterializedSource

            source = MaterializedSource(plan.materialized, plugins=plugins)
        elif plan.schedule is not None:
            schedule = MixtureSchedule(
                plan.schedule["breakpoints"], unit=plan.schedule["unit"], interpolate=plan.schedule["interpolate"]
            )
            source = plan.source(datasets, schedule, **plan.source_kwargs)
        else:
            mixture = MixtureSpec(plan.weights, ratios=plan.ratios) if plan.weights is not None else None
            source = plan.source(datasets, mixture, **plan.source_kwargs)
        pipeline = Pipeline(source, plugins=plugins)
        if plan.fetch:
            pipeline.fetch(**plan.fetch)
        for step in plan.steps:
            pipeline = _add_step(pipeline, step.operator, step.kwargs)
        pipeline.batch(**plan.batch)
        if plan.options:
            pipeline.options(**plan.options)
    except RecipeError:
        raise
    except ZephonError as exc:
        raise RecipeError([f"{where}: {exc}"]) from None
    return pipeline
