"""The dashboard (Flask): see webui/app.py."""
