"""Keep only the example that matches the chosen kind (operator or reader)."""

import pathlib

kind = "{{ cookiecutter.kind }}"
pkg = pathlib.Path("src") / "{{ cookiecutter.package_name }}"
unused = {"operator": ["reader.py", "index.py"], "reader": ["operator.py"]}[kind]
for name in unused:
    (pkg / name).unlink()
