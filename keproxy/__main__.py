"""``python -m keproxy`` runs the command line."""

from keproxy.cli import app

app()
