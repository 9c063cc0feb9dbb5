"""Browser fixtures live in tests/browser_support.py and are registered by tests/conftest.py;
these names stay importable from here for tests written against this module."""

from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, LiveServer, sign_in

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "LiveServer", "sign_in"]
