"""The readiness report: built from the rank files and the launcher's observations.

Runs in the launcher. ``build`` reads the typed rank events into stages, problems (root
causes first) and measurements; ``text`` renders the table, the problem blocks and the
verdict line, with the measurement tables of ``tables``; ``as_json`` writes the JSON;
``plots`` draws PNGs; ``junit`` writes JUnit XML; ``comparison`` renders ``ddpcheck
compare`` and ``--baseline``; ``catalog`` lists the probes and every
problem code (``docs/problems.md``). Every table ddpcheck prints is rendered here.
"""
