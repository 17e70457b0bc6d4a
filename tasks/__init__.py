"""The tasks a run trains on, chosen in one place (registry): values (the rubric prompts, a judged
reward) and chess (its environment, few-shot turns and labelled-position generator).

Beside rewards/: a task may import rewards, never the other way (tests/test_layers.py).
"""
