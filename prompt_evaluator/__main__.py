"""`python -m prompt_evaluator`: the same command as `prompt-evaluator`."""

from prompt_evaluator.cli import main

if __name__ == "__main__":
    main()
