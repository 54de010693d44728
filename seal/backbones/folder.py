"""A backbone's model folder without weights: the real tokenizer, the backbone's chat template and the
released `config.json`. verl's agent loop, the launcher's dry run and `check_masks.py` need nothing more;
random weights for memory and speed work are added on top by `scripts/make_smoke_model.py --weights random`.
"""

from __future__ import annotations

import json
from pathlib import Path

from seal.backbones.catalog import Backbone


def write_tokenizer_and_config(backbone: Backbone, out: Path, config: dict | None = None) -> Path:
    """Write `backbone`'s tokenizer (chat template included) and `config.json` (the released one unless
    `config` is given, e.g. a tiny shape for CPU tests) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    backbone.tokenizer().save_pretrained(out)
    write_portable_tokenizer_config(out, backbone.chat_template)
    write_config(out, backbone.config if config is None else config)
    return out


def write_portable_tokenizer_config(out: Path, chat_template: str) -> None:
    """Rewrite the saved `tokenizer_config.json` so that transformers 4.5x and 5.x both load the folder (a
    GPU node's image may have either): the generic fast-tokenizer class (5.x names it `TokenizersBackend`,
    which 4.x lacks), the extra special tokens under the key both read, and the chat template inside the
    file, where the released configs carry it (5.x would write a separate `chat_template.jinja`)."""
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config.pop("backend", None)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = config.pop("extra_special_tokens", None)
    if extra:
        config["additional_special_tokens"] = list(extra)
    config["chat_template"] = chat_template
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)


def write_config(out: Path, config: dict) -> None:
    """`config.json` exactly as given (transformers would add and rename fields on its own save)."""
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
