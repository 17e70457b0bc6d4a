"""The GRPO loop's parts under train.py: the run configuration, the run's state and exact resume,
one step's rollout batch and update, the KL reference, gradient routing, data-parallel ranks,
checkpoints, the metrics and rollout logs, TensorBoard, the in-run reward-model refresh and its
training data, the in-training evaluation hook.

Above core, the card's library modules (model, kvcache, load_weights, gwen, rubric, grpo), rewards/
and tasks/; below evals/ and the commands (tests/test_layers.py).
"""
