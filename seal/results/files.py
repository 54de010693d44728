"""The file names of a `seal eval` output folder, which the evaluation writes (seal/evaluation/store.py)
and the reports and the viewer read."""

ACTIONS = "actions.jsonl"
EPISODES = "episodes.jsonl"
RUN = "run.json"
