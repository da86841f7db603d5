"""Engines that run rfed's algorithms past one process (Flower: :mod:`rfed.engines.flower`)."""
