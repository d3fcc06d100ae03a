"""Reading recipes: YAML and TOML give the same data, lines are kept, includes and overrides merge."""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_recipes import RecipeError, load_document


def test_yaml_and_toml_read_the_same(workdir: Path) -> None:
    a = load_document(workdir / "recipes" / "tiny.yaml")
    b = load_document(workdir / "recipes" / "tiny.toml")
    assert a.data == b.data


@pytest.mark.parametrize(
    ("name", "key", "text"),
    [
        ("tiny.yaml", ("mixture", "weights", "code"), "weights: {web: 0.75, code: 0.25}"),
        ("tiny.yaml", ("operators", 1, "shuffle", "seed"), "- shuffle: {buffer_size: 8, seed: 3}"),
        ("tiny.yaml", ("datasets", "code", "path"), "path: ../data/code"),
        ("tiny.toml", ("mixture", "weights", "code"), "weights = { web = 0.75, code = 0.25 }"),
        ("tiny.toml", ("operators", 1, "shuffle", "seed"), "seed = 3"),
        ("tiny.toml", ("operators", 0, "map_transform", "fn"), 'map_transform = { fn = "copy:copy", parallelism = 2 }'),
        ("tiny.toml", ("datasets", "code", "path"), 'path = "../data/code"'),
    ],
)
def test_every_key_keeps_its_line(workdir: Path, name: str, key: tuple[str | int, ...], text: str) -> None:
    path = workdir / "recipes" / name
    loc = load_document(path).loc(key)
    assert loc.file == str(path)
    assert path.read_text().splitlines()[loc.line - 1].strip() == text


def test_a_variant_overrides_its_base(workdir: Path) -> None:
    base = load_document(workdir / "recipes" / "tiny.yaml")
    variant = load_document(workdir / "recipes" / "variant.yaml")
    assert variant.data["mixture"]["weights"] == {"web": 0.5, "code": 0.5}
    assert variant.data["mixture"]["seed"] == base.data["mixture"]["seed"] == 7  # merged, not replaced
    assert variant.data["operators"][1] == {"shuffle": {"buffer_size": 8, "seed": 4}}
    assert variant.data["operators"][0]["map_transform"]["parallelism"] == 3
    assert variant.loc(("mixture", "weights", "web")).file.endswith("variant.yaml")
    assert variant.loc(("mixture", "seed")).file.endswith("tiny.yaml")
    assert variant.loc(("operators", 1, "shuffle", "seed")).line == 6  # the `set:` entry
    assert variant.files == [str(workdir / "recipes" / "tiny.yaml"), str(workdir / "recipes" / "variant.yaml")]


def test_command_line_overrides_come_last(workdir: Path) -> None:
    doc = load_document(
        workdir / "recipes" / "variant.yaml",
        ["mixture.weights.web=0.6", "mixture.weights.code=0.4", "operators[1].shuffle.seed=9", "options.trace=true"],
    )
    assert doc.data["mixture"]["weights"] == {"web": 0.6, "code": 0.4}
    assert doc.data["operators"][1]["shuffle"]["seed"] == 9
    assert doc.data["options"]["trace"] is True
    assert str(doc.loc(("mixture", "weights", "web"))) == "--set mixture.weights.web"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("operators.tokenize.seed=1", "no step 'tokenize'"),
        ("operators[7].seed=1", "out of range"),
        ("mixture.weights", "expected KEY=VALUE"),
    ],
)
def test_bad_overrides_say_why(workdir: Path, override: str, message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        load_document(workdir / "recipes" / "tiny.yaml", [override])


def test_include_cycles_and_bad_files(workdir: Path) -> None:
    (workdir / "a.yaml").write_text("include: b.yaml\n")
    (workdir / "b.yaml").write_text("include: a.yaml\n")
    with pytest.raises(RecipeError, match="include cycle"):
        load_document(workdir / "a.yaml")
    (workdir / "bad.yaml").write_text("datasets:\n  web: {path: x\n")
    with pytest.raises(RecipeError, match=r"bad.yaml:\d+: not valid YAML"):
        load_document(workdir / "bad.yaml")
    (workdir / "twice.yaml").write_text("options:\n  lanes: 1\n  lanes: 2\n")
    with pytest.raises(RecipeError, match=r"twice.yaml:3: options.lanes: written twice"):
        load_document(workdir / "twice.yaml")
    (workdir / "bad.toml").write_text("[options]\nlanes = = 2\n")
    with pytest.raises(RecipeError, match=r"bad.toml:2: not valid TOML"):
        load_document(workdir / "bad.toml")
