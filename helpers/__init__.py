"""Helpers behind the notebooks: export, convert, repository, server, client, perf, plots."""
