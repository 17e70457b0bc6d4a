"""What a run is paid: the plain reward functions (builtin), the reward registry (registry), the
scorer the loop calls (scorer), the one pushback detector, the reward model, the hack detectors,
broken-text negatives. Inside the folder builtin sits lowest, registry imports it, scorer both.

Above core and the card's library modules; a task registers its rewards, so rewards never import
tasks/, rl/ or anything above (tests/test_layers.py).
"""
