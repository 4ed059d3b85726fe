"""The scenario schema: what a scenario file may say, validated, with nothing above it.

Everything else reads these models (data flows one way: scenario file -> resolved config ->
network -> run -> records -> analysis); nothing here imports the controller, the testbed,
the results or the dashboard.
"""
