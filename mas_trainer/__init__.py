"""stronger-mas trainer: AT-GRPO (agent- and turn-wise grouped GRPO with tree sampling) on top of TRL."""
