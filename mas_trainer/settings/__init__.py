"""What a run is, before anything runs: its configuration, the env spec, the method table, per-role maps.

The lowest layer of :mod:`mas_trainer` (docs/ARCHITECTURE.md): it imports nothing else of the trainer.
Only :mod:`mas_trainer.settings.config` imports TRL; the other modules are plain Python.
"""
