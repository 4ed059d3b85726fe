"""Analytic and stochastic latency models of short TCP transfers (hysteresis paper; docs/models.md)."""
