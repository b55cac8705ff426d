"""crossbench_analysis: read a crossbench results cube and turn it into answers.

Commands (``python3 -m crossbench_analysis --help``): report, procurement,
compare, export.  See analysis/README.md.
"""

__version__ = "0.1.0"
