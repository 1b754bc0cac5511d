"""The one YAML reader of input files: lines kept, repeated keys refused, one-line errors."""

from __future__ import annotations

import pytest

from preflight.config.errors import InputError
from preflight.config.yamlfile import line_of, read


def test_keys_keep_their_lines(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text("a: 1\nb:\n  c: 2\n  d: 3\n")
    doc = read(str(p))
    assert doc == {"a": 1, "b": {"c": 2, "d": 3}}
    assert (line_of(doc, "b"), line_of(doc["b"], "d"), line_of(doc, "zz")) == (2, 4, None)


@pytest.mark.parametrize("text,message", [
    ("a: 1\nb: 2\na: 3\n", ":3: invalid YAML: duplicate key 'a' (first on line 1)"),
    ("? [1, 2]\n: x\n", ":1: invalid YAML: a key must be a plain value, not list"),
    ("a: [1,\n", ": invalid YAML:"),
    ("a: !!python/object:os.system x\n", ":1: invalid YAML:"),
])
def test_bad_yaml_is_one_line_naming_file_and_line(tmp_path, text, message):
    p = tmp_path / "a.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as err:
        read(str(p))
    assert str(err.value).startswith(f"{p}") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_file_raises_the_callers_error(tmp_path):
    class Mine(InputError):
        pass

    with pytest.raises(Mine, match="no such file"):
        read(str(tmp_path / "nope.yaml"), Mine)
