"""The dataset loader under the guide's import path: `from prompt_evaluator.config import load_dataset`."""

from webapp.datasets.loader import DatasetError, TestCase, load_dataset

__all__ = ["DatasetError", "TestCase", "load_dataset"]
