"""Measuring: the stages that run a target's artifact and record what they measured."""
