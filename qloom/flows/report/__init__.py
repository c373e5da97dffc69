"""The compile report: ``OUT/report.md``, ``OUT/report.html`` and its charts, and ``qloom report``."""
