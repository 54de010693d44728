"""`seal eval`: command, endpoint client, context budget, episode runner, run folder, official re-score."""
