"""Keep only the example that matches the chosen kind (operator or reader), then say how to install it.

zephon-core is not on PyPI yet, so the usual ``pip install -e '.[test]'`` cannot find it: the
generated README's "Development" section gives the commands that work.
"""

import pathlib

kind = "{{ cookiecutter.kind }}"
pkg = pathlib.Path("src") / "{{ cookiecutter.package_name }}"
unused = {"operator": ["reader.py", "index.py"], "reader": ["operator.py"]}[kind]
for name in unused:
    (pkg / name).unlink()

print(
    "Generated {{ cookiecutter.project_slug }}. zephon-core is not on PyPI yet: install with\n"
    "  cd {{ cookiecutter.project_slug }}\n"
    "  python -m pip wheel --no-deps --wheel-dir wheels path/to/zephon path/to/zephon/plugins/zephon-storage\n"
    "  pip install --find-links wheels -e '.[test]'\n"
    "(see its README, 'Development')."
)
