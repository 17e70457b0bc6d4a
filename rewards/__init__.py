"""What a run is paid: the reward registry and the scorer the loop calls (registry), the reward
model, the hack detectors, broken-text negatives.

Above core and the card's library modules; a task registers its rewards, so rewards never import
tasks/, rl/ or anything above (tests/test_layers.py).
"""
