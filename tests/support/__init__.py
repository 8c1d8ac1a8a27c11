"""Helpers the tests share: fake forges, task files, synthetic nights, the daemon under test.

Fixtures among them reach the tests through `pytest_plugins` in `tests/conftest.py`; plain
functions and classes are imported as `from support.<module> import ...`.
"""
