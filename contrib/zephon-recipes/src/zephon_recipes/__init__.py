"""Zephon recipes: a whole pipeline as one YAML or TOML file, validated before anything runs.

``load_recipe("train.yaml", overrides=["mixture.weights.web=0.6"])`` returns the
:class:`~zephon_core.Pipeline` the file describes (``Pipeline.from_recipe`` is the same call);
:func:`read_recipe` validates without building; :func:`materialize` writes what a prefix of the
recipe produces and :func:`read_materialized` reads it back as a work source. The ``zephon
check``, ``run``, ``diff``, ``materialize`` and ``recipe-schema`` commands come with this package.
"""

from __future__ import annotations

from zephon_recipes.build import Recipe, load_recipe, read_recipe
from zephon_recipes.document import RecipeError, load_document
from zephon_recipes.materialize import materialize
from zephon_recipes.materialized import MaterializedSource, read_materialized

__version__ = "0.1.0"

__all__ = [
    "MaterializedSource",
    "Recipe",
    "RecipeError",
    "load_document",
    "load_recipe",
    "materialize",
    "read_materialized",
    "read_recipe",
]
