"""The readiness report: built from the rank files and the launcher's observations.

Runs in the launcher. ``build`` reads the events into stages and problems and renders the
table, the problem blocks and the JSON; ``plots`` draws PNGs; ``junit`` writes JUnit XML;
``catalog`` lists the probes and every problem code (``docs/problems.md``).
"""
