"""parsers/toml_files: a TOML file's marshal copy in __pycache__ gives what tomllib gives, and is
never read once the file has changed."""
import os
import tomllib

from correlator.parsers import toml_files
from correlator.parsers.spec import FORMATS_DIR


def test_the_copy_gives_what_tomllib_gives(tmp_path):
    path = tmp_path / "rules.toml"
    path.write_text('[[rule]]\nname = "a"\nranks = [1, 2]\nconfidence = 0.5\n')
    first = toml_files.load(path)
    assert (tmp_path / "__pycache__" / "rules.toml.marshal").is_file()
    assert first == toml_files.load(path) == tomllib.loads(path.read_text())


def test_a_changed_file_is_parsed_again(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text('x = 1\n')
    assert toml_files.load(path) == {"x": 1}
    path.write_text('x = 22\n')
    os.utime(path, ns=(1, 1))  # a time that differs from the copy's even on a coarse clock
    assert toml_files.load(path) == {"x": 22}


def test_an_unwritable_folder_parses_each_time(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text('x = 1\n')
    (tmp_path / "__pycache__").write_text("not a folder")  # no copy can be kept under it
    assert toml_files.load(path) == toml_files.load(path) == {"x": 1}


def test_a_value_marshal_cannot_hold_is_parsed_each_time(tmp_path):
    path = tmp_path / "f.toml"
    path.write_text('when = 2026-12-02\n')
    assert toml_files.load(path) == toml_files.load(path) == tomllib.loads(path.read_text())
    assert not (tmp_path / "__pycache__" / "f.toml.marshal").exists()


def test_the_formats_load_as_tomllib_reads_them():
    for path in sorted(FORMATS_DIR.glob("*.toml")):
        assert toml_files.load(path) == tomllib.loads(path.read_text()), path.name
