"""Evaluation's parts: the grader (grade), the gold set, the answer cache, grading, the report,
read sets, and the routing evaluation; evaluate.py is the command that puts them together.

Above rl/; below the commands (tests/test_layers.py).
"""
