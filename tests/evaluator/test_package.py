"""The `prompt_evaluator` package: the guide's import path, its examples, and `python -m prompt_evaluator`."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "datasets" / "sample.yaml"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


class TestGuideImportPath:
    def test_guide_loading_example(self) -> None:
        # The guide's snippet, as written: `from prompt_evaluator.config import load_dataset`.
        from prompt_evaluator.config import load_dataset

        test_cases, meta = load_dataset(SAMPLE)
        assert [c.id for c in test_cases][:3] == ["recipe-scale-down", "meeting-notes-actions", "explain-dns"]
        first = test_cases[0]
        assert first.input.startswith("Rewrite this recipe for two people")
        assert first.task == "Scale a recipe"
        assert first.metadata == {"difficulty": "easy", "topic": "cooking"}
        assert meta["path"] == str(SAMPLE.resolve())
        assert meta["hash"] == "sha256:" + hashlib.sha256(SAMPLE.read_bytes()).hexdigest()
        assert meta["count"] == len(test_cases)
        assert meta["format"] == ".yaml"

    def test_it_is_the_shared_loader(self) -> None:
        from prompt_evaluator import config
        from webapp.datasets import loader

        assert config.load_dataset is loader.load_dataset
        assert config.TestCase is loader.TestCase
        assert issubclass(config.DatasetError, ValueError)

    @pytest.mark.parametrize(
        ("name", "text", "message"),
        [
            (
                "dup.jsonl",
                '{"id": "test-001", "input": "First case"}\n{"id": "test-001", "input": "Duplicate ID!"}\n',
                "Duplicate test case ID 'test-001' found at line 2",
            ),
            ("missing.jsonl", '{"input": "Missing ID field"}\n', "Record at line 1 is missing required field: id"),
            ("empty.yaml", '- id: ""\n  input: "Empty ID string"\n', "Invalid test case at index 0: id field validation failed"),
            ("dataset.csv", "id,input\n", "Unsupported dataset file format: .csv. Supported formats: .jsonl, .yaml, .yml"),
        ],
    )
    def test_guide_validation_examples(self, tmp_path: Path, name: str, text: str, message: str) -> None:
        from prompt_evaluator.config import load_dataset

        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError) as info:
            load_dataset(path)
        assert str(info.value) == message


class TestInstalled:
    def test_importable_outside_the_checkout(self, tmp_path: Path) -> None:
        # From another folder the checkout is not on sys.path: only an installed package imports.
        code = f"import prompt_evaluator.config as c, pathlib; print(c.load_dataset(pathlib.Path(r'{SAMPLE}'))[1]['count'])"
        done = _run("-c", code, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        from webapp.datasets.loader import load_dataset

        assert done.stdout.strip() == str(len(load_dataset(SAMPLE)[0]))

    def test_console_script_points_at_the_package(self) -> None:
        scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
        assert scripts["prompt-evaluator"] == "prompt_evaluator.cli:main"

    def test_python_dash_m_works_like_the_command(self, tmp_path: Path) -> None:
        module = _run("-m", "prompt_evaluator", "--help", cwd=tmp_path)
        assert module.returncode == 0, module.stderr
        assert "evaluate-dataset" in module.stdout and "cache" in module.stdout
        script = subprocess.run(
            [str(Path(sys.executable).parent / "prompt-evaluator"), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert script.returncode == 0, script.stderr
        same = " ".join(module.stdout.replace("python -m prompt_evaluator", "prompt-evaluator").split())
        assert same == " ".join(script.stdout.split())  # box padding aside, the same help
        done = _run("-m", "prompt_evaluator", "evaluate-dataset", "-d", "x.jsonl", "-s", "p.txt", "--quick", "-n", "7", cwd=tmp_path)
        assert done.returncode == 2
        assert "--quick" in done.stderr and "--num-samples" in done.stderr
