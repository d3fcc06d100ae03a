"""Zephon recipes: a whole pipeline as one YAML or TOML file, validated before anything runs.

``load_recipe("train.yaml", overrides=["mixture.weights.web=0.6"])`` returns the
:class:`~zephon_core.Pipeline` the file describes (``Pipeline.from_recipe`` is the same call);
:func:`read_recipe` validates without building. The ``zephon check``, ``run``, ``diff`` and
``recipe-schema`` commands come with this package.
"""

from __future__ import annotations

from zephon_recipes.build import Recipe, load_recipe, read_recipe
from zephon_recipes.document import RecipeError, load_document

__version__ = "0.1.0"

__all__ = ["Recipe", "RecipeError", "load_document", "load_recipe", "read_recipe"]
