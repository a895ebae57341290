"""The app's functions as the host indexes them: indexed once per process (indexing twice
fails on "duplicate" names), for every test that reads them."""

from __future__ import annotations

from function_app import app

INDEXED = app.get_functions()
