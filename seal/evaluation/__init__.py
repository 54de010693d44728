"""`seal eval`: the command, endpoint client, episode runner, output folder and official re-score."""
