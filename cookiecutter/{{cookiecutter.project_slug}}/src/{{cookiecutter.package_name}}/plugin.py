"""Registration with Zephon (found through the ``zephon`` entry point in pyproject.toml).

Factories are lazy "module:attr" strings, so importing zephon_core does not import this package's
dependencies until the {{ cookiecutter.kind }} is used. ``register`` takes keyword arguments only; its
type ({% if cookiecutter.kind == 'operator' %}``Register``{% else %}``ReaderRegister``{% endif %}) lets a type checker catch a misspelled or missing one.
"""

from __future__ import annotations

from zephon_core.hookspecs import {% if cookiecutter.kind == 'operator' %}Register{% else %}ReaderRegister{% endif %}, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


{% if cookiecutter.kind == 'operator' -%}
@hookimpl
def zephon_register_operators(register: Register) -> None:
    register(
        name="{{ cookiecutter.name }}",
        factory="{{ cookiecutter.package_name }}.operator:{{ cookiecutter.class_name }}",
        description="{{ cookiecutter.description }}",
    )
{%- else -%}
@hookimpl
def zephon_register_readers(register: ReaderRegister) -> None:
    register(
        name="{{ cookiecutter.name }}",
        factory="{{ cookiecutter.package_name }}.reader:{{ cookiecutter.class_name }}",
        detect="{{ cookiecutter.package_name }}.reader:detect",
        index="{{ cookiecutter.package_name }}.index:build_index",
        description="{{ cookiecutter.description }}",
    )
{%- endif %}
