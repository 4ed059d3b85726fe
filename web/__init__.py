"""The dashboard (Flask): see web/app.py."""
