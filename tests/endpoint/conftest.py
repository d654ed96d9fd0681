"""The endpoint tests use the session-wide `server` and `models_dir` fixtures of tests/conftest.py."""
