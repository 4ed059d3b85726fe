"""Independent references for the testbed's mechanisms, written from the papers' text (not from
the engine's code), and the trace generators that compare them with the engine."""
