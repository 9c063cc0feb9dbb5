"""Prompt Evaluator: dataset-driven evaluation of a system prompt with a generator and an LLM judge.

The package is the import path the dataset format guide documents (`prompt_evaluator.config`);
the code lives in Draft Desk (`webapp.datasets.loader`, `webapp.evaluator`).
"""
