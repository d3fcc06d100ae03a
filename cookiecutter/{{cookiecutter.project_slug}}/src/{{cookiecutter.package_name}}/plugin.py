"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

Factories are lazy "module:attr" strings, so importing zephon_core does not import this package's
dependencies until the {{ cookiecutter.kind }} is used.
"""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import hookimpl

{% if cookiecutter.kind == 'operator' -%}
@hookimpl
def zephon_register_operators(register: Any) -> None:
    register(
        name="{{ cookiecutter.name }}",
        factory="{{ cookiecutter.package_name }}.operator:{{ cookiecutter.class_name }}",
        description="{{ cookiecutter.description }}",
    )
{%- else -%}
@hookimpl
def zephon_register_readers(register: Any) -> None:
    register(
        name="{{ cookiecutter.name }}",
        factory="{{ cookiecutter.package_name }}.reader:{{ cookiecutter.class_name }}",
        detect="{{ cookiecutter.package_name }}.reader:detect",
        index="{{ cookiecutter.package_name }}.index:build_index",
        description="{{ cookiecutter.description }}",
    )
{%- endif %}
