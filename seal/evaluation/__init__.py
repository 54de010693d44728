"""The machinery behind `seal eval`: endpoint client, episode runner, output folder, official re-score."""
