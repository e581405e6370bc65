"""What an agent is asked: its observation's prompt text as the token ids of a one-turn chat.

Needs only a tokenizer (no model, no torch), so the rollout stays torch-free.
"""

from __future__ import annotations

from typing import Any


def chat_prompt_ids(tokenizer: Any, prompt_text: str, system: str | None = None) -> list[int]:
    """Token ids of a one-turn chat prompt, ready for the assistant's answer.

    Uses the tokenizer's chat template (user message, generation prompt added); a tokenizer
    without a template gets the plain text (after the system text, if any) and a newline.
    """
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": prompt_text})
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # The template already holds the special tokens (e.g. <|im_start|>); do not add BOS twice.
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    plain = f"{system}\n{prompt_text}\n" if system else f"{prompt_text}\n"
    return list(tokenizer(plain)["input_ids"])
