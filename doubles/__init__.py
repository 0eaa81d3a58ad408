"""Test doubles: scripted chat models (:mod:`doubles.chat`), the scripted replies of each workflow
(:mod:`doubles.replies`) and a scripted OpenAI-compatible endpoint
(:mod:`doubles.endpoint`, also ``python -m doubles.endpoint``), for tests, benchmarks and demos.

Outside the runtime layers: ``graphs``, ``nodes`` and ``stores`` never import this package.
"""
