"""SEAL's RL loop on verl: its agent loop, task runner, trainer and what they share."""

from pathlib import Path

AGENT_LOOPS = Path(__file__).with_name("agent_loops.yaml").resolve()
"""The packaged agent-loop list (`rollout.agent.agent_loop_config_path`), named here without importing verl:
composing an experiment must stay cheap."""
