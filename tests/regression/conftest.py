"""The regression tests share the checks tests' world: a KB, a dataset, runs A and B, a lead."""

from tests.checks.conftest import world  # noqa: F401  (a fixture, shared by import)
